package extauthz

import (
	"io"
	"log/slog"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// maxCacheHitAllocs bounds the allocations of one cache-hit Check (gRPC
// request conversion, decision, response, JSON log line): the goal of at most 60.
// Measured on linux/amd64, Go 1.26: 12 once the allow answer's messages
// and its headers are one allocation (grpc.go's allowAnswer); 14 once the binding header is formatted
// in one allocation, the peer's key is passed on as the WireKubePeer holds
// it (its one canonical encoding), the signature's headers are appended
// into room the decision made for them and the in-Pod MAC's states are
// pooled; 22 before that, with an Ed25519 signature; 52 before the cache
// hit skipped the payload decode; 189 when every Check verified the
// signature again. No margin: each of those steps is one allocation, and a
// runtime that allocates differently changes this line with a note.
const maxCacheHitAllocs = 12

// TestCheckCacheHitAllocs guards the cache-hit Check: its allocations per
// call, also after a JWKS refresh that fetched the same keys (the cached
// verification still holds; nothing is verified again).
func TestCheckCacheHitAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under -race are not the program's (make test-unit runs this without it)")
	}
	e := newEnv(t, nil)
	e.authz.log = slog.New(slog.NewJSONHandler(io.Discard, nil)) // formatted as in production
	// Through a front: Envoy appends the address it saw.
	req := relayCheck(e.answer(static(podBound())), func(h map[string]string) { h["x-forwarded-for"] = "203.0.113.7" })
	ctx := fromLoopback() // a front in the Pod: trusted, its address read
	check := func() {
		if resp, _ := e.srv.Check(ctx, req); resp.GetOkResponse() == nil {
			t.Fatal("cache-hit check denied")
		}
	}
	check()
	for _, phase := range []string{"cached", "after a refresh of the same keys"} {
		if n := testing.AllocsPerRun(200, check); n > maxCacheHitAllocs {
			t.Errorf("%s: %.0f allocations per cache-hit Check, want <= %d", phase, n, maxCacheHitAllocs)
		}
		must(t, e.authz.keys.Refresh(ctx, "periodic"))
	}
}

// TestAllowResponseSetsEveryHeader checks that an allow answer carries each
// header of its decision in order, overwriting, both within the headers an
// answer holds inline and beyond them.
func TestAllowResponseSetsEveryHeader(t *testing.T) {
	for _, n := range []int{0, 2, 7, 8, 9, 12} {
		var hs []Header
		for i := range n {
			hs = append(hs, Header{Name: "X-H" + string(rune('a'+i)), Value: "v" + string(rune('a'+i))})
		}
		got := checkResponse(Decision{Headers: hs}).GetOkResponse()
		if got == nil {
			t.Fatalf("%d headers: no OK answer", n)
		}
		if len(got.GetHeaders()) != n {
			t.Fatalf("%d headers: answer sets %d", n, len(got.GetHeaders()))
		}
		for i, h := range got.GetHeaders() {
			wantK, wantV := "X-H"+string(rune('a'+i)), "v"+string(rune('a'+i))
			if h.GetHeader().GetKey() != wantK || h.GetHeader().GetValue() != wantV ||
				h.GetAppendAction() != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
				t.Errorf("%d headers: header %d is %v, want %s: %s overwriting", n, i, h, wantK, wantV)
			}
		}
		if rm := got.GetHeadersToRemove(); len(rm) != 1 || rm[0] != "authorization" {
			t.Errorf("%d headers: removes %v, want [authorization]", n, rm)
		}
	}
}
