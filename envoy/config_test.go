package envoy

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// configFiles is every Envoy config in this directory: a new file is checked
// without anyone adding it to a list.
func configFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found %v, want at least envoy.yaml and envoy-plaintext.yaml", files)
	}
	return files
}

func TestShippedConfigs(t *testing.T) {
	for _, file := range configFiles(t) {
		t.Run(file, func(t *testing.T) {
			v := loadView(t, file)
			for _, p := range properties() {
				t.Run(p.name, func(t *testing.T) {
					if err := p.check(v); err != nil {
						t.Errorf("%s: %v", file, err)
					}
				})
			}
		})
	}
}

// TestPropertiesCanFail breaks each protection in a copy of each config and
// expects its check to notice.
func TestPropertiesCanFail(t *testing.T) {
	for _, file := range configFiles(t) {
		base := loadView(t, file)
		for _, p := range properties() {
			t.Run(file+"/"+p.name, func(t *testing.T) {
				v := base.clone(t)
				p.breakIt(v)
				if err := p.check(v); err == nil {
					t.Errorf("check passed on a config without the protection")
				}
			})
		}
	}
}

// TestPlaintextMatchesTLS keeps the two variants from drifting: with the
// listener's TLS, name, port and trusted hops made equal, they are the same.
func TestPlaintextMatchesTLS(t *testing.T) {
	tlsCfg := loadView(t, envoyconfig.TLSConfig)
	plain := loadView(t, envoyconfig.PlaintextConfig)
	if tlsCfg.tls == nil || plain.tls != nil {
		t.Fatalf("want TLS in %s only", envoyconfig.TLSConfig)
	}
	tlsCfg.relay.GetFilterChains()[0].TransportSocket = nil
	tlsCfg.relay.Name = plain.relay.GetName()
	tlsCfg.relay.Address = plain.relay.GetAddress()
	tlsCfg.hcm.XffNumTrustedHops = plain.hcm.GetXffNumTrustedHops()
	// Re-pack the edited HCM into the TLS bootstrap before comparing.
	if err := tlsCfg.relay.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().MarshalFrom(tlsCfg.hcm); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(plain.boot, tlsCfg.boot) {
		t.Errorf("%s and %s differ beyond TLS, name, port and xff hops:\n%s", envoyconfig.PlaintextConfig, envoyconfig.TLSConfig,
			firstDiff(t, plain.boot, tlsCfg.boot))
	}
}

// firstDiff shows the first differing lines of two bootstraps as JSON.
func firstDiff(t *testing.T, a, b *bootstrapv3.Bootstrap) string {
	t.Helper()
	ja, err := envoyconfig.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := envoyconfig.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	la, lb := strings.Split(string(ja), "\n"), strings.Split(string(jb), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d lines", len(la), len(lb))
}
