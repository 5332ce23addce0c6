package extauthz

import (
	"context"
	"testing"
	"time"
)

// BenchmarkCheckLine is the metrics and the JSON check line of one plain
// cache-hit allow (Authorizer.observe), without the decision.
func BenchmarkCheckLine(b *testing.B) {
	e := benchEnv(b, nil)
	req := Request{Frontend: "grpc", Method: "GET", Target: "/relay", RequestID: "0f6c1d2e3a4b5c6d"}
	d := Decision{Identity: "system:serviceaccount:wirekube-system:wirekube-agent", Peer: "node-a",
		KeyFingerprint: "4bb06f8e", CacheHit: true}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		e.authz.observe(ctx, req, d, "192.0.2.10", 3*time.Microsecond)
	}
}
