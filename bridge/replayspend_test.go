package bridge

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

// TestRefusedUpgradeSpendsNoNonce: an upgrade with a valid signature that
// a later check refuses leaves the replay cache as it was; only the 101
// spends the nonce.
func TestRefusedUpgradeSpendsNoNonce(t *testing.T) {
	key := testutil.SigningKey(1)
	tests := []struct {
		name   string
		opts   func(*Options)
		before func(*Server)
		req    func(*http.Request)
		reason contract.Reason
	}{
		{"origin", nil, nil, func(r *http.Request) { r.Header.Set("Origin", "https://elsewhere.example") }, contract.ReasonOriginNotAllowed},
		{"subprotocol", nil, nil, func(r *http.Request) { r.Header.Set("Sec-WebSocket-Protocol", "other") }, contract.ReasonSubprotocol},
		{"peer session limit", func(o *Options) { o.MaxSessionsPerPeer, o.MaxUnregisteredPerPeer = 1, 1 },
			func(s *Server) { s.peers.limits.Acquire("node-a") }, nil, contract.ReasonPeerSessionLimit},
		{"peer unregistered limit", func(o *Options) { o.MaxUnregisteredPerPeer = 1 },
			func(s *Server) { s.peers.limits.Acquire("node-a") }, nil, contract.ReasonPeerUnregisteredLimit},
		{"global slots", func(o *Options) { o.MaxSessions = 1 }, func(s *Server) { s.acquire() }, nil, contract.ReasonAtCapacity},
		{"relay down", nil, nil, nil, contract.ReasonRelayUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions("127.0.0.1:1")
			o.IdentityKeysFile = testutil.PublishKeys(t, key)
			o.DialRelay = func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("relay down (test)") }
			if tt.opts != nil {
				tt.opts(&o)
			}
			srv := mustNew(t, o, &testutil.SyncBuffer{}, prometheus.NewRegistry())
			if tt.before != nil {
				tt.before(srv)
			}
			r := upgradeRequest()
			testutil.SignHeaders(r.Header, key, time.Now())
			if tt.req != nil {
				tt.req(r)
			}
			w := httptest.NewRecorder()
			srv.Handler().ServeHTTP(w, r)
			if got := w.Header().Get(contract.HeaderDenyReason); got != string(tt.reason) {
				t.Fatalf("refused with %d %q, want %q", w.Code, got, tt.reason)
			}
			if n := srv.signatures.ReplayEntries(); n != 0 {
				t.Fatalf("a refused upgrade left %d nonces in the replay cache, want 0", n)
			}
		})
	}
}

// TestPeerAtShareLeavesOthersAdmitted: once a peer's upgrades answered 101
// fill its share of the replay cache, its next one is refused 429
// identity_replay_peer_share and another peer is still admitted.
func TestPeerAtShareLeavesOthersAdmitted(t *testing.T) {
	key := testutil.SigningKey(1)
	h := startBridge(t, func(o *Options) {
		o.IdentityKeysFile = testutil.PublishKeys(t, key)
		o.IdentityReplayPeerShare = 2
	})
	ka, kb := testKey(1), testKey(2)
	for range 2 {
		h.registeredAs(t, testutil.SignHeaders(identity(ka), key, time.Now()), ka).Close()
	}
	d := websocket.Dialer{Subprotocols: []string{contract.Subprotocol}, HandshakeTimeout: 5 * time.Second}
	ws, resp, err := d.Dial(h.url, testutil.SignHeaders(identity(ka), key, time.Now()))
	if err == nil {
		ws.Close()
		t.Fatal("third upgrade of node-a admitted, want 429 identity_replay_peer_share")
	}
	if resp == nil || resp.StatusCode != http.StatusTooManyRequests ||
		resp.Header.Get(contract.HeaderDenyReason) != string(contract.ReasonIdentityReplayPeerShare) {
		t.Fatalf("got %v (%v), want 429 identity_replay_peer_share", resp, err)
	}
	other := identity(kb)
	other.Set(contract.HeaderPeer, "node-b")
	h.registeredAs(t, testutil.SignHeaders(other, key, time.Now()), kb).Close()
	if got := promtest.ToFloat64(h.srv.metrics.rejects.WithLabelValues(string(contract.ReasonIdentityReplayPeerShare))); got != 1 {
		t.Errorf("rejects_total{reason=identity_replay_peer_share} = %v, want 1", got)
	}
}

// TestOnePeerFloodingLeavesOthersAdmitted: one peer floods a bridge whose
// replay cache holds 16 nonces: first 40 signed upgrades refused by its
// session limit (429 peer_session_limit each, none spending a nonce), then
// admitted ones until its share of 4 is spent (3 beyond the session it
// held). Another peer is admitted after each flood.
func TestOnePeerFloodingLeavesOthersAdmitted(t *testing.T) {
	key := testutil.SigningKey(1)
	h := startBridge(t, func(o *Options) {
		o.IdentityKeysFile = testutil.PublishKeys(t, key)
		o.IdentityReplayCacheSize, o.IdentityReplayPeerShare = 16, 4
		o.MaxSessionsPerPeer, o.MaxUnregisteredPerPeer = 1, 1
	})
	ka := testKey(1)
	signedAs := func(peer string, k relayproto.Key) http.Header {
		hdr := identity(k)
		hdr.Set(contract.HeaderPeer, peer)
		return testutil.SignHeaders(hdr, key, time.Now())
	}
	held := h.registeredAs(t, signedAs("node-a", ka), ka)
	for i := range 40 {
		if got := upgradeStatus(t, h.url, signedAs("node-a", ka)); got != contract.ReasonPeerSessionLimit {
			t.Fatalf("refused flood, upgrade %d: %q, want %q", i, got, contract.ReasonPeerSessionLimit)
		}
	}
	h.registeredAs(t, signedAs("node-b", testKey(2)), testKey(2)).Close()
	held.Close()
	admitted := 0
	for range 1000 { // a 429 of the session limit (the last session not yet ended) is tried again
		switch got := upgradeStatus(t, h.url, signedAs("node-a", ka)); got {
		case "":
			admitted++
			continue
		case contract.ReasonPeerSessionLimit, contract.ReasonPeerUnregisteredLimit:
			continue
		case contract.ReasonIdentityReplayPeerShare:
		default:
			t.Fatalf("admitted flood after %d admitted: %q", admitted, got)
		}
		break
	}
	if admitted != 3 {
		t.Fatalf("admitted flood: %d upgrades answered 101 before identity_replay_peer_share, want 3", admitted)
	}
	h.registeredAs(t, signedAs("node-c", testKey(3)), testKey(3)).Close()
}

// upgradeStatus upgrades with hdr and closes at once: "" when answered
// 101, else the deny reason.
func upgradeStatus(t *testing.T, url string, hdr http.Header) contract.Reason {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{contract.Subprotocol}, HandshakeTimeout: 5 * time.Second}
	ws, resp, err := d.Dial(url, hdr)
	if err == nil {
		ws.Close()
		return ""
	}
	if resp == nil {
		t.Fatalf("dial: %v", err)
	}
	return contract.Reason(resp.Header.Get(contract.HeaderDenyReason))
}
