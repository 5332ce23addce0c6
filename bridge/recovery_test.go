package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

// flakyRelay fails every dial while down is set, then dials the real relay.
type flakyRelay struct {
	addr  string
	down  atomic.Bool
	dials atomic.Int64
}

func (f *flakyRelay) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	f.dials.Add(1)
	if f.down.Load() {
		return nil, errors.New("relay down (test)")
	}
	var d net.Dialer
	return d.DialContext(ctx, network, f.addr)
}

func startFlaky(t *testing.T, mod func(*Options)) (*harness, *flakyRelay) {
	t.Helper()
	fr := &flakyRelay{}
	h := startBridge(t, func(o *Options) {
		fr.addr = o.RelayAddr
		o.DialRelay = fr.dial
		if mod != nil {
			mod(o)
		}
	})
	return h, fr
}

// dialResult is the outcome of one upgrade attempt.
type dialResult struct {
	ws     *websocket.Conn
	status int
	reason string
	retry  string
	err    error
}

func tryDial(url string, hdr http.Header, protos ...string) dialResult {
	if len(protos) == 0 {
		protos = []string{contract.Subprotocol}
	}
	d := websocket.Dialer{Subprotocols: protos, HandshakeTimeout: 10 * time.Second}
	ws, resp, err := d.Dial(url, hdr)
	r := dialResult{ws: ws, err: err}
	if resp != nil {
		r.status, r.reason, r.retry = resp.StatusCode, resp.Header.Get(contract.HeaderDenyReason), resp.Header.Get("Retry-After")
	}
	return r
}

// waitHeld waits until n upgrades are held (a state, not a duration).
func waitHeldRelay(t *testing.T, s *Server, n int) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("%d held upgrades", n), func() bool { return s.hold.heldNow() == n })
}

func TestRelayWaitHoldsUntilTheRelayIsBack(t *testing.T) {
	h, fr := startFlaky(t, func(o *Options) { o.RelayWait = 9 * time.Second })
	fr.down.Store(true)
	results := make(chan dialResult, 2)
	for i := range 2 {
		go func() { results <- tryDial(h.url, identityOf("node-h"+string(rune('0'+i)), testKey(byte(10+i)))) }()
	}
	waitHeldRelay(t, h.srv, 2)
	before := fr.dials.Load()
	waitDials(t, fr, before+3) // one redial loop keeps dialing
	fr.down.Store(false)
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Fatalf("held upgrade: %v (status %d %s)", r.err, r.status, r.reason)
		}
		r.ws.Close()
	}
	if n := h.srv.hold.heldNow(); n != 0 {
		t.Fatalf("%d still held", n)
	}
}

func waitDials(t *testing.T, fr *flakyRelay, n int64) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("%d relay dials", n), func() bool { return fr.dials.Load() >= n })
}

func identityOf(peer string, k relayproto.Key) http.Header {
	h := identity(k)
	h.Set(contract.HeaderPeer, peer)
	h.Set(contract.HeaderIdentity, "system:serviceaccount:wirekube-system:"+peer)
	return h
}

func TestRelayWaitEndsWith503AndBound(t *testing.T) {
	h, fr := startFlaky(t, func(o *Options) { o.RelayWait = 300 * time.Millisecond; o.RelayWaitMax = 1 })
	fr.down.Store(true)
	if r := tryDial(h.url, identityOf("node-w", testKey(1))); r.status != http.StatusServiceUnavailable ||
		r.reason != string(contract.ReasonRelayUnavailable) || r.retry == "" {
		t.Fatalf("after the wait: %d %q Retry-After %q, want 503 relay_unavailable", r.status, r.reason, r.retry)
	}
	h2, fr2 := startFlaky(t, func(o *Options) {
		o.RelayWait, o.RelayWaitMax = 9*time.Second, 1
		o.MaxSessionsPerPeer, o.MaxUnregisteredPerPeer = 2, 1
	})
	fr2.down.Store(true)
	first := make(chan dialResult, 1)
	go func() { first <- tryDial(h2.url, identityOf("node-x", testKey(1))) }()
	waitHeldRelay(t, h2.srv, 1)
	if r := tryDial(h2.url, identityOf("node-y", testKey(2))); r.reason != string(contract.ReasonRelayWaitFull) ||
		r.status != http.StatusServiceUnavailable {
		t.Fatalf("over --relay-wait-max: %d %q, want 503 relay_wait_full", r.status, r.reason)
	}
	// A held request of the same peer is its unregistered share: no second.
	if r := tryDial(h2.url, identityOf("node-x", testKey(1))); r.reason != string(contract.ReasonPeerUnregisteredLimit) {
		t.Fatalf("same peer while held: %d %q, want 429 peer_unregistered_limit", r.status, r.reason)
	}
	h2.stop() // the drain answers the held request at once
	if r := <-first; r.status != http.StatusServiceUnavailable || r.reason != string(contract.ReasonDraining) {
		t.Fatalf("held during the drain: %d %q, want 503 draining", r.status, r.reason)
	}
}

func TestPeerLimitsBeforeTheUpgrade(t *testing.T) {
	// The replacement's Register ends the older session (1008
	// session_replaced); it still counts until its client answers the close
	// or the close grace (the shorter of closeGrace and --write-timeout)
	// ends. This client never answers: a grace the test cannot outlast
	// keeps both counted for the third dial (with the harness's 500 ms, a
	// slow machine saw the third dial admitted).
	h := startBridge(t, func(o *Options) {
		o.MaxSessionsPerPeer, o.MaxUnregisteredPerPeer = 2, 1
		o.WriteTimeout = time.Minute
	})
	h.srv.closeGrace = time.Minute
	k := testKey(1)
	unreg := h.dial(t, identity(k)) // upgraded, no Register yet
	if r := tryDial(h.url, identity(k)); r.status != http.StatusTooManyRequests ||
		r.reason != string(contract.ReasonPeerUnregisteredLimit) || r.retry != "1" {
		t.Fatalf("second unregistered: %d %q Retry-After %q, want 429 peer_unregistered_limit", r.status, r.reason, r.retry)
	}
	send(t, unreg, relayproto.AppendRegister(nil, k))
	waitCounts(t, h.srv, "node-a", 1, 0)
	second := h.register(t, k) // the replacement during a reconnect fits
	if r := tryDial(h.url, identity(k)); r.status != http.StatusTooManyRequests || r.reason != string(contract.ReasonPeerSessionLimit) {
		t.Fatalf("third session: %d %q, want 429 peer_session_limit", r.status, r.reason)
	}
	second.Close()
	unreg.Close()
	waitCounts(t, h.srv, "node-a", 0, 0)
}

func waitCounts(t *testing.T, s *Server, peer string, sessions, unreg int) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("peer %s with %d sessions, %d unregistered", peer, sessions, unreg), func() bool {
		a, b := s.peers.limits.Counts(peer)
		return a == sessions && b == unreg
	})
}

func TestKeyMismatchBackoffBeforeTheUpgrade(t *testing.T) {
	h := startBridge(t, nil)
	k := testKey(1)
	ws := h.dial(t, identity(k))
	send(t, ws, relayproto.AppendRegister(nil, testKey(2)))
	expectClose(t, ws, websocket.ClosePolicyViolation, contract.CloseRegisterKeyMismatch)
	testutil.Eventually(t, "the mismatch struck", func() bool { return h.srv.peers.backoff.Len() == 1 })
	r := tryDial(h.url, identity(k))
	if r.err == nil {
		r.ws.Close()
	}
	// The 1 s window may have passed on a slow machine; then it upgrades.
	if r.err != nil && (r.status != http.StatusForbidden || r.reason != string(contract.CloseRegisterKeyMismatch) || r.retry == "") {
		t.Fatalf("inside the window: %d %q Retry-After %q, want 403 register_key_mismatch", r.status, r.reason, r.retry)
	}
	// The peer's key changed: admitted at once.
	fixed := h.register(t, testKey(3))
	fixed.Close()
	if h.srv.peers.backoff.Len() != 0 {
		t.Fatal("a verified Register did not reset the backoff")
	}
}

func TestProbeModeNeverReachesTheRelay(t *testing.T) {
	pr := newPipeRelay()
	h := startBridge(t, func(o *Options) { o.DialRelay = pr.dial })
	tests := []struct {
		name   string
		send   []byte
		code   int
		reason contract.Reason
	}{
		{"matching key", relayproto.AppendRegister(nil, testKey(1)), websocket.CloseNormalClosure, contract.CloseProbeOK},
		{"other key", relayproto.AppendRegister(nil, testKey(2)), websocket.ClosePolicyViolation, contract.CloseRegisterKeyMismatch},
		{"not register", relayproto.AppendFrame(nil, relayproto.TypeKeepalive, nil), websocket.ClosePolicyViolation, contract.CloseRegisterMissing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tryDial(h.url, identity(testKey(1)), contract.SubprotocolProbe)
			if r.err != nil {
				t.Fatalf("probe upgrade: %v (%d %s)", r.err, r.status, r.reason)
			}
			defer r.ws.Close()
			if r.ws.Subprotocol() != contract.SubprotocolProbe {
				t.Fatalf("subprotocol %q", r.ws.Subprotocol())
			}
			relayEnd := pr.next(t)
			// Split across two messages: the probe input is a byte stream too.
			send(t, r.ws, tc.send[:3])
			send(t, r.ws, tc.send[3:])
			expectClose(t, r.ws, tc.code, tc.reason)
			if b := readAll(t, relayEnd); len(b) != 0 {
				t.Fatalf("the relay got %d bytes from a probe", len(b))
			}
		})
	}
	if h.srv.peers.backoff.Len() != 0 {
		t.Fatal("a probe's mismatch counted for the backoff")
	}
}

func TestBothSubprotocolsOfferedIsASession(t *testing.T) {
	h := startBridge(t, nil)
	r := tryDial(h.url, identity(testKey(1)), contract.SubprotocolProbe, contract.Subprotocol)
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.ws.Close()
	if r.ws.Subprotocol() != contract.Subprotocol {
		t.Fatalf("subprotocol %q, want the agent's", r.ws.Subprotocol())
	}
}

// expectDenyHandler calls the relay handler directly with an upgrade.
func expectDenyHandler(t *testing.T, s *Server, reason contract.Reason) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, s.cfg.Path, nil)
	r.Header = identity(testKey(3))
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Version", "13")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	if w.Code != reason.HTTPStatus() || w.Header().Get(contract.HeaderDenyReason) != string(reason) {
		t.Fatalf("handler: %d %q, want %d %s", w.Code, w.Header().Get(contract.HeaderDenyReason), reason.HTTPStatus(), reason)
	}
}

// TestRegisteredBeforeRelaySeesRegister: when the Register reaches the relay
// the session has already left its peer's unregistered share, so the
// relay's answer to a frame sent in the same message (the agent's echo)
// cannot arrive before the share is free and make the peer's next dial 429.
// Fails when the share is released only after the whole run is forwarded.
func TestRegisteredBeforeRelaySeesRegister(t *testing.T) {
	relay := newPipeRelay()
	h := startBridge(t, func(o *Options) {
		o.DialRelay = relay.dial
		o.MaxSessionsPerPeer, o.MaxUnregisteredPerPeer = 2, 1
	})
	k := testKey(1)
	ws := h.dial(t, identity(k))
	end := relay.next(t)
	send(t, ws, append(relayproto.AppendRegister(nil, k), dataFrame(k, 1, 40)...))
	_ = end.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hdr [relayproto.HeaderSize]byte
	if _, err := io.ReadFull(end, hdr[:]); err != nil {
		t.Fatalf("relay read: %v", err)
	}
	// The bridge is still inside its write of the run: nothing after the
	// Register's first bytes has been read from the pipe.
	if sessions, unreg := h.srv.peers.limits.Counts("node-a"); sessions != 1 || unreg != 0 {
		t.Fatalf("when the relay saw Register: %d sessions, %d unregistered; want 1, 0", sessions, unreg)
	}
}
