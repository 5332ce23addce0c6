package envoyconfig

import (
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestListenerLimits: the relay listener's limits as envoy.yaml writes them,
// and Envoy's defaults (1 h, 60 KiB) for a listener that leaves them unset.
func TestListenerLimits(t *testing.T) {
	b, err := LoadShipped(TLSConfig)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ListenerLimits(b, "relay_tls")
	if err != nil {
		t.Fatal(err)
	}
	if lim.IdleTimeout != 300*time.Second || lim.MaxRequestHeaderBytes != 16*1024 {
		t.Errorf("relay_tls: %+v, want 300s and 16384 bytes (envoy.yaml)", lim)
	}
	// envoy_metrics sets max_request_headers_kb 16 and no idle_timeout.
	lim, err = ListenerLimits(b, "envoy_metrics")
	if err != nil {
		t.Fatal(err)
	}
	if lim.IdleTimeout != time.Hour || lim.MaxRequestHeaderBytes != 16*1024 {
		t.Errorf("envoy_metrics: %+v, want 1h (Envoy's default) and 16384 bytes", lim)
	}
	if _, err := ListenerLimits(b, "nope"); err == nil {
		t.Error("no error for a missing listener")
	}
}

// TestListenerLimitsDefaults: with max_request_headers_kb and idle_timeout
// removed from the relay listener, the limits are Envoy's defaults.
func TestListenerLimitsDefaults(t *testing.T) {
	b, err := LoadShipped(TLSConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range b.GetStaticResources().GetListeners() {
		if l.GetName() != "relay_tls" {
			continue
		}
		f := l.GetFilterChains()[0].GetFilters()[0]
		hcm := &hcmv3.HttpConnectionManager{}
		if err := f.GetTypedConfig().UnmarshalTo(hcm); err != nil {
			t.Fatal(err)
		}
		hcm.MaxRequestHeadersKb = nil
		hcm.CommonHttpProtocolOptions.IdleTimeout = nil
		a, err := anypb.New(hcm)
		if err != nil {
			t.Fatal(err)
		}
		f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
	}
	lim, err := ListenerLimits(b, "relay_tls")
	if err != nil {
		t.Fatal(err)
	}
	if lim.IdleTimeout != time.Hour || lim.MaxRequestHeaderBytes != 60*1024 {
		t.Errorf("unset: %+v, want Envoy's 1h and 61440 bytes", lim)
	}
}
