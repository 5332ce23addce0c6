package bridge

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testagent"
)

// switchRelay is a relay that can be taken down: while down every dial is
// refused and the open connections are closed (the bridge sees relay_lost);
// while up each dial gets a pipe whose far end reads and discards.
type switchRelay struct {
	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func (r *switchRelay) dial(context.Context, string, string) (net.Conn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return nil, errors.New("connect: connection refused")
	}
	bridgeEnd, relayEnd := net.Pipe()
	r.conns = append(r.conns, relayEnd)
	go func() { _, _ = io.Copy(io.Discard, relayEnd) }() // ends when either end closes
	return bridgeEnd, nil
}

func (r *switchRelay) set(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
	if down {
		for _, c := range r.conns {
			_ = c.Close()
		}
		r.conns = nil
	}
}

// TestRelayOutageWithAgentPolicy: with the default
// --relay-wait and an agent that follows the real agent's reconnect policy
// (testagent.Reconnector: 10 s handshake timeout, waits 1, 2, 4, 8 s after
// failed dials), the session that ends a 3 s, 15 s or 40 s relay outage
// comes from a dial that was already held when the relay came back: the
// agent is upgraded the moment the relay returns, not at its next backoff
// step. The refused dials before it are the ones the policy forces, written
// down from the schedule in docs/bridge.md#relay-wait (holds of 7.5 s:
// dials at 1, 10.5, 22 and 37.5 s after the disconnect).
func TestRelayOutageWithAgentPolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outage  time.Duration
		refused int
	}{
		{"3s", 3 * time.Second, 0},
		{"15s", 15 * time.Second, 1},
		{"40s", 40 * time.Second, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { relayOutage(t, tc.outage, tc.refused) })
		})
	}
}

func relayOutage(t *testing.T, outage time.Duration, wantRefused int) {
	relay := &switchRelay{}
	b := startBubble(t, func(o *Options) {
		o.DialRelay = relay.dial
		o.RelayWait = DefaultOptions().RelayWait // the default is what is tested
	})
	agent := &testagent.Reconnector{
		Options: testagent.Options{URL: "ws://bridge/relay", Header: identity(testKey(1)),
			NetDialContext: b.ln.DialContext, KeepaliveInterval: -1},
		Key: testKey(1), Peer: testKey(2), Interval: time.Second,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); agent.Run(ctx) }() // owned: waited for below
	time.Sleep(time.Second)
	synctest.Wait()
	if d := agent.Report().Dials; len(d) != 0 {
		t.Fatalf("the first dial failed: %+v", d)
	}
	down := time.Now()
	relay.set(true)
	time.Sleep(outage)
	back := time.Now()
	relay.set(false)
	// A session is recorded when it ends: stop the agent well after the
	// longest backoff step that could follow.
	time.Sleep(time.Minute)
	cancel()
	<-done
	var restored *testagent.SessionRecord
	for _, s := range agent.Report().Sessions {
		if s.Dialed.After(down) {
			restored = &s
			break
		}
	}
	if restored == nil {
		t.Fatalf("no session after the outage: %+v", agent.Report())
	}
	if !restored.Dialed.Before(back) || restored.Upgraded.Before(back) {
		t.Errorf("the session after the outage was dialed %s and upgraded %s after the relay went down (back after %s): "+
			"want a dial held across the relay's return", restored.Dialed.Sub(down), restored.Upgraded.Sub(down), outage)
	}
	refused := 0
	for _, d := range agent.Report().Dials {
		if d.Dialed.After(down) && d.Dialed.Before(restored.Dialed) {
			refused++
			if d.Status != 503 || d.Reason != string(contract.ReasonRelayUnavailable) {
				t.Errorf("dial at +%s: %d %q, want 503 relay_unavailable", d.Dialed.Sub(down), d.Status, d.Reason)
			}
		}
	}
	if refused != wantRefused {
		t.Errorf("%d refused dials before the session, want %d (the policy's forced ones): %+v", refused, wantRefused, agent.Report().Dials)
	}
}
