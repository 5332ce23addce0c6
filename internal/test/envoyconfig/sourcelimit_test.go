package envoyconfig

import (
	"testing"
	"time"
)

// TestRelaySourceLimit: the per-source bucket as envoy.yaml writes it (off,
// and sized for when it is turned on: a burst of 20000, 200 per 1s, 25000
// addresses), on both variants.
func TestRelaySourceLimit(t *testing.T) {
	want := SourceLimit{Enabled: false, Burst: 20000, PerFill: 200, FillInterval: time.Second, Buckets: 25000}
	for file, listener := range map[string]string{TLSConfig: "relay_tls", PlaintextConfig: "relay_plaintext"} {
		b, err := LoadShipped(file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := RelaySourceLimit(b, listener)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if got != want {
			t.Errorf("%s: %+v, want %+v", file, got, want)
		}
		// The metrics listener has no relay route, so no limit.
		if _, err := RelaySourceLimit(b, "envoy_metrics"); err == nil {
			t.Errorf("%s: envoy_metrics has a per-source limit", file)
		}
	}
}
