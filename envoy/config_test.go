package envoy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
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

// TestEmbeddedMatchesDisk: Shipped (what the e2e suite runs) is the file here.
func TestEmbeddedMatchesDisk(t *testing.T) {
	for _, file := range append(configFiles(t), SDSConfig) {
		got, err := Shipped(file)
		if err != nil {
			t.Fatalf("%s is not embedded: %v", file, err)
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("embedded %s differs from the file", file)
		}
	}
}

// TestPlaintextMatchesTLS keeps the two variants from drifting: with the
// listener's TLS, name, port and trusted hops made equal, they are the same.
func TestPlaintextMatchesTLS(t *testing.T) {
	tlsCfg := loadView(t, TLSConfig)
	plain := loadView(t, PlaintextConfig)
	if tlsCfg.tls == nil || plain.tls != nil {
		t.Fatalf("want TLS in %s only", TLSConfig)
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
		t.Errorf("%s and %s differ beyond TLS, name, port and xff hops:\n%s", PlaintextConfig, TLSConfig,
			firstDiff(t, plain.boot, tlsCfg.boot))
	}
}

func TestDecodeRejects(t *testing.T) {
	good, err := os.ReadFile(TLSConfig)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, old, new, want string
	}{
		{"unknown field", "failure_mode_allow: false", "failure_mode_allow: false\n              fail_open: false", "unknown field"},
		{"unregistered type", "envoy.extensions.filters.http.router.v3.Router", "envoy.extensions.filters.http.nope.v3.Nope", "nope"},
		{"constraint violation", "connect_timeout: 1s", "connect_timeout: -1s", "validate"},
		{"wrong type", "port_value: 9001", "port_value: ninety", "portvalue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := strings.Replace(string(good), tt.old, tt.new, 1)
			if bad == string(good) {
				t.Fatalf("fixture: %q not found in %s", tt.old, TLSConfig)
			}
			_, err := Decode([]byte(bad))
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), tt.want) {
				t.Errorf("Decode error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// firstDiff shows the first differing lines of two bootstraps as JSON.
func firstDiff(t *testing.T, a, b *bootstrapv3.Bootstrap) string {
	t.Helper()
	ja, err := Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := Marshal(b)
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

func TestSDSRejects(t *testing.T) {
	good, err := Shipped(SDSConfig)
	if err != nil {
		t.Fatal(err)
	}
	if secrets, err := DecodeSDS(good); err != nil || len(secrets) != 1 {
		t.Fatalf("shipped SDS file: %d secrets, %v", len(secrets), err)
	}
	tests := []struct{ name, old, new, want string }{
		{"unknown field", "watched_directory:", "watched_dir:", "unknown field"},
		{"wrong type", "envoy.extensions.transport_sockets.tls.v3.Secret", "envoy.extensions.transport_sockets.tls.v3.Nope", "nope"},
		{"empty watched directory", "{path: /etc/envoy/tls}", "{path: \"\"}", "validate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := strings.Replace(string(good), tt.old, tt.new, 1)
			if bad == string(good) {
				t.Fatalf("fixture: %q not found", tt.old)
			}
			_, err := DecodeSDS([]byte(bad))
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), tt.want) {
				t.Errorf("DecodeSDS error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}
