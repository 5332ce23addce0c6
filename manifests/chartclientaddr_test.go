package manifests

import (
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// TestChartClientAddress: envoy.clientAddress sets Envoy's trusted
// X-Forwarded-For hops and extauthz's --trusted-hops to the same number,
// and proxyProtocol puts the PROXY protocol listener filter (letting
// connections without a header through, for the kubelet's probes) on the
// relay listener only.
func TestChartClientAddress(t *testing.T) {
	for _, tc := range []struct {
		name     string
		extra    []string
		listener string
		hops     uint32
		flag     string // extauthz --trusted-hops; "" : none
		proxy    bool
	}{
		{"default", nil, "relay_tls", 0, "", false},
		{"plaintext keeps its one hop", []string{"--set", "envoy.config=envoy-plaintext.yaml"}, "relay_plaintext", 1, "1", false},
		{"two hops before the TLS listener", []string{"--set", "envoy.clientAddress.trustedHops=2"}, "relay_tls", 2, "2", false},
		{"plaintext set to none", []string{"--set", "envoy.config=envoy-plaintext.yaml,envoy.clientAddress.trustedHops=0"}, "relay_plaintext", 0, "", false},
		{"proxy protocol", []string{"--set", "envoy.clientAddress.proxyProtocol=true"}, "relay_tls", 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := renderChart(t, tc.extra...)
			d := r.deployment(t)
			b := envoyConfig(t, r, d)
			hcm := relayHCM(t, b, tc.listener)
			mustf(t, hcm.GetXffNumTrustedHops() == tc.hops, "xff_num_trusted_hops %d, want %d", hcm.GetXffNumTrustedHops(), tc.hops)
			v, ok := flagValue(container(d, "extauthz").Args, "trusted-hops")
			mustf(t, v == tc.flag && ok == (tc.flag != ""), "extauthz --trusted-hops=%q (set %v), want %q", v, ok, tc.flag)
			for _, l := range b.GetStaticResources().GetListeners() {
				pp := proxyProtocolFilter(t, l.GetListenerFilters())
				want := tc.proxy && l.GetName() == tc.listener
				mustf(t, (pp != nil) == want, "listener %s: proxy_protocol filter %v, want %v", l.GetName(), pp != nil, want)
				mustf(t, pp == nil || pp.GetAllowRequestsWithoutProxyProtocol(), "listener %s: connections without a PROXY header refused (kubelet probes)", l.GetName())
			}
		})
	}
}

// relayHCM is the HTTP connection manager of the named listener.
func relayHCM(t *testing.T, b *bootstrapv3.Bootstrap, name string) *hcmv3.HttpConnectionManager {
	t.Helper()
	for _, l := range b.GetStaticResources().GetListeners() {
		if l.GetName() != name {
			continue
		}
		hcm := &hcmv3.HttpConnectionManager{}
		if err := l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
			t.Fatalf("listener %s: %v", name, err)
		}
		return hcm
	}
	t.Fatalf("no listener %s", name)
	return nil
}

// proxyProtocolFilter is the PROXY protocol listener filter among fs, nil
// when there is none.
func proxyProtocolFilter(t *testing.T, fs []*listenerv3.ListenerFilter) *proxyprotocolv3.ProxyProtocol {
	t.Helper()
	for _, f := range fs {
		pp := &proxyprotocolv3.ProxyProtocol{}
		if f.GetTypedConfig().UnmarshalTo(pp) == nil {
			return pp
		}
	}
	return nil
}
