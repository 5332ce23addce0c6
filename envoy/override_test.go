package envoy

import (
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
)

func TestOverridesApply(t *testing.T) {
	b, err := envoyconfig.LoadShipped(envoyconfig.TLSConfig)
	if err != nil {
		t.Fatal(err)
	}
	o := envoyconfig.Overrides{
		Admin:     "127.0.0.1:19901",
		Listeners: map[string]string{"relay_tls": "127.0.0.1:18443", "envoy_metrics": "127.0.0.1:19902"},
		Clusters:  map[string]string{"extauthz": "127.0.0.1:19001", "bridge": "127.0.0.1:18081", "envoy_admin": "127.0.0.1:19901"},
		CertFile:  "/tmp/e2e/tls.crt",
		KeyFile:   "/tmp/e2e/tls.key",
	}
	if err := o.Apply(b); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	js, err := envoyconfig.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	// The output must be a config Envoy accepts: decode and validate it again.
	again, err := envoyconfig.Decode(js)
	if err != nil {
		t.Fatalf("overridden config does not decode: %v", err)
	}
	v, err := newView(again)
	if err != nil {
		t.Fatal(err)
	}
	ap, _ := socketAddr(v.boot.GetAdmin().GetAddress().GetSocketAddress())
	lp, _ := socketAddr(v.relay.GetAddress().GetSocketAddress())
	ea, _ := v.endpoint("extauthz")
	br, _ := v.endpoint("bridge")
	certs := v.tls.GetCommonTlsContext().GetTlsCertificates()
	if len(certs) != 1 || len(v.tls.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()) != 0 {
		t.Fatalf("after Apply: %d inline certificates and SDS %v, want one inline and no SDS", len(certs),
			v.tls.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs())
	}
	cert := certs[0]
	got := []string{ap.String(), lp.String(), ea.String(), br.String(),
		cert.GetCertificateChain().GetFilename(), cert.GetPrivateKey().GetFilename()}
	want := []string{"127.0.0.1:19901", "127.0.0.1:18443", "127.0.0.1:19001", "127.0.0.1:18081", "/tmp/e2e/tls.crt", "/tmp/e2e/tls.key"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("after Apply got %v, want %v", got, want)
			break
		}
	}
	// Everything else stays: the protections still hold.
	for _, p := range properties() {
		if p.name == "admin_on_loopback" || p.name == "tls_listener" || p.name == "ext_authz_grpc_loopback_http2" || p.name == "bridge_admits_max_sessions" {
			continue // addresses and certificate paths changed on purpose
		}
		if err := p.check(v); err != nil {
			t.Errorf("%s after Apply: %v", p.name, err)
		}
	}
}

func TestOverridesReject(t *testing.T) {
	tests := []struct {
		name string
		o    envoyconfig.Overrides
		want string
	}{
		{"unknown listener", envoyconfig.Overrides{Listeners: map[string]string{"relay": "127.0.0.1:1"}}, `no listener named "relay"`},
		{"unknown cluster", envoyconfig.Overrides{Clusters: map[string]string{"authz": "127.0.0.1:1"}}, `no cluster named "authz"`},
		{"hostname", envoyconfig.Overrides{Admin: "localhost:1"}, "literal IP"},
		{"no port", envoyconfig.Overrides{Clusters: map[string]string{"bridge": "127.0.0.1"}}, "missing port"},
		{"port range", envoyconfig.Overrides{Listeners: map[string]string{"relay_tls": "127.0.0.1:70000"}}, "port"},
		{"cert without key", envoyconfig.Overrides{CertFile: "/tmp/c.pem"}, "set both CertFile and KeyFile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := envoyconfig.LoadShipped(envoyconfig.TLSConfig)
			if err != nil {
				t.Fatal(err)
			}
			err = tt.o.Apply(b)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Apply error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
