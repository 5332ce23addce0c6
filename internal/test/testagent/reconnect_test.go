package testagent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// TestAgentPolicyFacts: the real agent's measured policy (docs/spec.md#agent).
func TestAgentPolicyFacts(t *testing.T) {
	if AgentPolicy.HandshakeTimeout != 10*time.Second || AgentPolicy.First != time.Second || AgentPolicy.Max != 30*time.Second {
		t.Fatalf("AgentPolicy = %+v, want 10s handshake, 1s first wait, 30s cap", AgentPolicy)
	}
	const s = time.Second
	tests := []struct {
		name     string
		outcomes []Outcome
		waits    []time.Duration
	}{
		{"after a disconnect 1 s, doubling per failed dial, cap 30 s",
			[]Outcome{Disconnected, DialFailed, DialFailed, DialFailed, DialFailed, DialFailed, DialFailed},
			[]time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s}},
		{"a finished upgrade resets the wait",
			[]Outcome{Disconnected, DialFailed, DialFailed, Disconnected, DialFailed},
			[]time.Duration{1 * s, 2 * s, 4 * s, 1 * s, 2 * s}},
		{"a first dial that fails waits 1 s",
			[]Outcome{DialFailed, DialFailed},
			[]time.Duration{1 * s, 2 * s}},
		{"a session closed right after the upgrade (key mismatch) retries every second",
			[]Outcome{Disconnected, Disconnected, Disconnected},
			[]time.Duration{1 * s, 1 * s, 1 * s}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBackoff(AgentPolicy)
			for i, o := range tc.outcomes {
				if got := b.Next(o); got != tc.waits[i] {
					t.Fatalf("wait %d = %s, want %s (sequence %v)", i, got, tc.waits[i], tc.waits)
				}
			}
		})
	}
}

// fakeGateway refuses the first refusals upgrades with 503 and Retry-After,
// then upgrades and echoes nothing; it records how each session ended.
type fakeGateway struct {
	refusals    int32
	dials       atomic.Int32
	sawClose    atomic.Bool
	sessionDone chan error
}

func (g *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.dials.Add(1) <= g.refusals {
		w.Header().Set("Retry-After", "3600") // ignored by the agent
		w.Header().Set(contract.HeaderDenyReason, string(contract.ReasonRelayUnavailable))
		http.Error(w, "no", http.StatusServiceUnavailable)
		return
	}
	up := websocket.Upgrader{Subprotocols: []string{contract.Subprotocol}}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	ws.SetCloseHandler(func(int, string) error { g.sawClose.Store(true); return nil })
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			g.sessionDone <- err
			return
		}
	}
}

func TestReconnectorIgnoresRetryAfterAndNeverSendsClose(t *testing.T) {
	g := &fakeGateway{refusals: 2, sessionDone: make(chan error, 1)}
	srv := httptest.NewServer(g)
	defer srv.Close()
	r := &Reconnector{
		Options: Options{URL: "ws" + strings.TrimPrefix(srv.URL, "http"), KeepaliveInterval: -1},
		Key:     relayproto.Key{1}, Peer: relayproto.Key{2},
		// The facts, shrunk so the test takes milliseconds.
		Policy:   Policy{HandshakeTimeout: 5 * time.Second, First: time.Millisecond, Max: 4 * time.Millisecond},
		Interval: time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	deadline := time.After(10 * time.Second)
	for g.dials.Load() < 3 {
		select {
		case <-deadline:
			t.Fatalf("%d dials, want 3 (Retry-After must be ignored)", g.dials.Load())
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	<-done
	err := <-g.sessionDone
	if g.sawClose.Load() || websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
		t.Fatalf("the agent sent a close frame: %v", err)
	}
	rep := r.Report()
	if len(rep.Dials) != 2 || rep.Dials[0].Status != http.StatusServiceUnavailable ||
		rep.Dials[0].Reason != string(contract.ReasonRelayUnavailable) {
		t.Fatalf("dial records %+v, want two 503 relay_unavailable", rep.Dials)
	}
	if len(rep.Sessions) != 1 || rep.Sessions[0].ClosedByServer || rep.FalseConnected() != 0 {
		t.Fatalf("sessions %+v, want one ended by the agent", rep.Sessions)
	}
}

func TestFalseConnectedIsAnUpgradeClosedBeforeAnythingFlowed(t *testing.T) {
	cases := []struct {
		rec  SessionRecord
		want bool
	}{
		{SessionRecord{ClosedByServer: true}, true},
		{SessionRecord{ClosedByServer: true, Live: true}, false},
		{SessionRecord{ClosedByServer: false}, false},
	}
	for _, c := range cases {
		if got := c.rec.FalseConnected(); got != c.want {
			t.Errorf("%+v: FalseConnected %v, want %v", c.rec, got, c.want)
		}
	}
	gaps := Report{Gaps: []Gap{{From: time.Unix(10, 0), To: time.Unix(12, 0)}, {From: time.Unix(20, 0), To: time.Unix(25, 0)}}}
	if got := gaps.LongestGapSince(time.Unix(13, 0)); got != 5*time.Second {
		t.Errorf("LongestGapSince = %s, want 5s", got)
	}
}
