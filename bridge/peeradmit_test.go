package bridge

import (
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/bridge/internal/peerlimit"
	"github.com/wirekube/relay-ws/internal/contract"
)

// TestVerifiedRegisterForgetsTheStrikes: an identity whose session ended
// with register_key_mismatch is refused for 1 s; once a session of it
// verifies its Register, its next mismatch starts again at 1 s, not 2 s.
func TestVerifiedRegisterForgetsTheStrikes(t *testing.T) {
	now := time.Unix(1000, 0)
	a := peerAdmission{limits: peerlimit.New(2, 1),
		backoff: peerlimit.NewBackoff(time.Minute, 4, func() time.Time { return now }),
		strikes: prometheus.NewCounter(prometheus.CounterOpts{Name: "strikes"}), log: slog.New(slog.DiscardHandler)}
	id := peerIdentity{Peer: "node-a", Subject: "sa-a", Key: testKey(1)}
	retryAfter := func() string {
		t.Helper()
		w := httptest.NewRecorder()
		if tk, reason := a.admit(w, id, false); reason != contract.CloseRegisterKeyMismatch {
			if tk != nil {
				tk.Release()
			}
			t.Fatalf("after a mismatch: admitted with %q, want register_key_mismatch", reason)
		}
		return w.Header().Get("Retry-After")
	}
	admitted := func() *peerlimit.Ticket {
		t.Helper()
		tk, reason := a.admit(httptest.NewRecorder(), id, false)
		if reason != "" {
			t.Fatalf("refused %q, want admitted", reason)
		}
		return tk
	}

	first := admitted()
	a.ended(first, &id, contract.CloseRegisterKeyMismatch)
	if got := retryAfter(); got != "1" {
		t.Fatalf("first mismatch: Retry-After %q, want 1", got)
	}
	now = now.Add(time.Second) // the window is over
	fixed := admitted()
	a.registered(fixed, &id)
	a.ended(fixed, &id, "") // ended without a close of the bridge
	again := admitted()
	a.ended(again, &id, contract.CloseRegisterKeyMismatch)
	if got := retryAfter(); got != "1" {
		t.Fatalf("a mismatch after a verified Register: Retry-After %q, want 1", got)
	}
}
