package bridge

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

// TestProbeLeavesTheAgentItsReconnect: a probe that sends nothing keeps
// its own share until its verdict, not the peer's unregistered one, so the
// agent's reconnect beside its live session is upgraded; a second probe at
// once is refused.
func TestProbeLeavesTheAgentItsReconnect(t *testing.T) {
	h := startBridge(t, func(o *Options) {
		o.MaxSessionsPerPeer, o.MaxUnregisteredPerPeer = 2, 1
		o.RegisterTimeout = time.Minute // the silent probe holds its share throughout
	})
	k := testKey(1)
	h.register(t, k)
	waitCounts(t, h.srv, "node-a", 1, 0) // the live session's Register verified
	probe := tryDial(h.url, identity(k), contract.SubprotocolProbe)
	if probe.err != nil {
		t.Fatalf("probe: %v (%d %s)", probe.err, probe.status, probe.reason)
	}
	defer probe.ws.Close()
	if r := tryDial(h.url, identity(k), contract.SubprotocolProbe); r.status != http.StatusTooManyRequests ||
		r.reason != string(contract.ReasonPeerUnregisteredLimit) {
		t.Fatalf("second probe at once: %d %q, want 429 peer_unregistered_limit", r.status, r.reason)
	}
	reconnect := tryDial(h.url, identity(k))
	if reconnect.err != nil {
		t.Fatalf("the agent's reconnect beside a silent probe: %v (%d %s), want upgraded", reconnect.err, reconnect.status, reconnect.reason)
	}
	defer reconnect.ws.Close()
	send(t, reconnect.ws, relayproto.AppendRegister(nil, k))
	waitCounts(t, h.srv, "node-a", 1, 0) // the replacement closed the old session
}

// TestProbeLingerCountsAgainstThePeer: a probe waiting after its verdict
// for the client's close holds a global slot; a peer has one such linger at
// a time, and its next probe closes without waiting, so a client that never
// answers the close holds one slot, not one per probe.
func TestProbeLingerCountsAgainstThePeer(t *testing.T) {
	h := startBridge(t, func(o *Options) { o.WriteTimeout = time.Minute })
	h.srv.closeGrace = time.Minute // a linger would outlast the test
	k := testKey(1)
	silentProbe := func() *websocket.Conn {
		r := tryDial(h.url, identity(k), contract.SubprotocolProbe)
		if r.err != nil {
			t.Fatalf("probe: %v (%d %s)", r.err, r.status, r.reason)
		}
		r.ws.SetCloseHandler(func(int, string) error { return nil }) // never answers the close
		send(t, r.ws, relayproto.AppendRegister(nil, k))
		_, _, err := r.ws.ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure || ce.Text != string(contract.CloseProbeOK) {
			t.Fatalf("probe verdict: %v, want 1000 probe_ok", err)
		}
		return r.ws
	}
	first := silentProbe()
	testutil.Eventually(t, "the first probe lingering", func() bool { p, l := h.srv.peers.limits.ProbeCounts("node-a"); return p == 0 && l == 1 })
	second := silentProbe()
	defer second.Close()
	testutil.Eventually(t, "one global slot held (the first probe's linger)", func() bool { return h.srv.slotsNow() == 1 })
	first.Close()
	testutil.Eventually(t, "no slot and no peer entry left", func() bool { return h.srv.slotsNow() == 0 && h.srv.peers.limits.Len() == 0 })
}

// slotsNow is the number of admitted requests holding a global slot.
func (s *Server) slotsNow() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.slots
}
