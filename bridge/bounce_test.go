package bridge

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/identitysig"
	"github.com/wirekube/relay-ws/internal/room"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

// dialResult dials as k and reports "101 <close code> <reason>" for a
// session the bridge closes before any Register, "101 open" for one it
// keeps, or "<status> <deny reason>" for a refusal.
func (b *bubble) dialResult(t *testing.T, hdr http.Header) string {
	t.Helper()
	d := websocket.Dialer{NetDialContext: b.ln.DialContext, Subprotocols: []string{contract.Subprotocol},
		HandshakeTimeout: 5 * time.Second}
	ws, resp, err := d.Dial("ws://bridge/relay", hdr)
	if err != nil {
		if resp == nil {
			t.Fatalf("dial: %v", err)
		}
		return resp.Status[:3] + " " + resp.Header.Get(contract.HeaderDenyReason)
	}
	t.Cleanup(func() { ws.Close() })
	_ = ws.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, _, err = ws.ReadMessage()
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return "101 " + strconv.Itoa(ce.Code) + " " + ce.Text
	}
	_ = b.relay.next(t) // the session's relay end, so that the next register reads its own
	return "101 open"
}

// held is the bridge's slot count as GET /room serves it.
func (b *bubble) held(t *testing.T) room.Room {
	t.Helper()
	resp, err := b.http.Get("http://bridge" + room.Path)
	if err != nil {
		t.Fatalf("GET /room: %v", err)
	}
	defer resp.Body.Close()
	var r room.Room
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("GET /room: %v", err)
	}
	return r
}

// TestBounceBetweenMarkAndMax: --max-sessions=10, --unready-at=50 (the mark
// at 5 sessions, the share 1/6 there, rising by 1/6 a session). Below the
// mark nothing is drawn; past it a draw under the share bounces (101, then
// close 1013 replica_full; no slot taken) and one above it admits; at
// --max-sessions the answer is 503 at_capacity whatever the draw.
func TestBounceBetweenMarkAndMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startBubble(t, func(o *Options) { o.MaxSessions, o.UnreadyAt = 10, 50 })
		draw, draws := 0.0, 0
		b.srv.bounceDice = func() float64 { draws++; return draw }
		for i := range 5 {
			b.register(t, testKey(byte(100+i)))
		}
		if draws != 0 {
			t.Fatalf("%d draws while under the mark, want 0", draws)
		}
		if got, want := b.held(t), (room.Room{Sessions: 5, FullAt: 5, Max: 10}); got != want {
			t.Fatalf("GET /room = %+v, want %+v", got, want)
		}
		draw = 0.10
		if got := b.dialResult(t, identity(testKey(110))); got != "101 1013 replica_full" {
			t.Errorf("5 held, draw 0.10 under the share 1/6: %s, want 101 1013 replica_full", got)
		}
		if got := b.held(t).Sessions; got != 5 {
			t.Errorf("after a bounce the bridge holds %d, want 5", got)
		}
		draw = 0.20
		if got := b.dialResult(t, identity(testKey(111))); got != "101 open" {
			t.Errorf("5 held, draw 0.20 over the share 1/6: %s, want 101 open", got)
		}
		draw = 0.95 // over 5/6, the share at 9 held
		for i := range 4 {
			b.register(t, testKey(byte(120+i)))
		}
		draw = 0
		if got := b.dialResult(t, identity(testKey(112))); got != "503 at_capacity" {
			t.Errorf("10 held, draw 0: %s, want 503 at_capacity", got)
		}
		if got := promtest.ToFloat64(b.srv.metrics.bounced.WithLabelValues(BounceByBridge)); got != 1 {
			t.Errorf("bounced_total{decided_by=bridge} = %v, want 1", got)
		}
		if draws != 6 {
			t.Errorf("%d draws, want 6 (one per dial from 5 to 9 held)", draws)
		}
	})
}

// TestBounceByAuthzDrawsNothing: with --full-bounce=authz the bridge past
// its mark admits what extauthz admitted; only extauthz's bounce answer is
// bounced.
func TestBounceByAuthzDrawsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startBubble(t, func(o *Options) { o.MaxSessions, o.UnreadyAt, o.FullBounce = 10, 50, BounceByAuthz })
		b.srv.bounceDice = func() float64 { return 0 }
		for i := range 6 {
			b.register(t, testKey(byte(100+i)))
		}
		if got := b.held(t).Sessions; got != 6 {
			t.Fatalf("the bridge holds %d, want 6: it drew a bounce", got)
		}
		bounce := http.Header{}
		bounce.Set(contract.HeaderBinding, contract.BindingBounce)
		if got := b.dialResult(t, bounce); got != "101 1013 replica_full" {
			t.Errorf("extauthz's bounce answer: %s, want 101 1013 replica_full", got)
		}
		if got := promtest.ToFloat64(b.srv.metrics.bounced.WithLabelValues(BounceByAuthz)); got != 1 {
			t.Errorf("bounced_total{decided_by=authz} = %v, want 1", got)
		}
	})
}

// TestBounceAnswerChecked: a bounce answer carrying an identity header, a
// repeated binding, or (with the signature check on) no valid signature
// over the bounce binding and client address is denied like any identity
// header set; a signed one is bounced.
func TestBounceAnswerChecked(t *testing.T) {
	key := testutil.SigningKey(7)
	now := time.Now()
	bounceHeaders := func(mod func(http.Header)) http.Header {
		h := http.Header{}
		h.Set(contract.HeaderBinding, contract.BindingBounce)
		h.Set(contract.HeaderClientAddress, "203.0.113.7")
		s := identitysig.NewSigner(key, func() time.Time { return now })
		h.Set(contract.HeaderSignature, s.Sign(identitysig.Fields{Binding: contract.BindingBounce, ClientAddress: "203.0.113.7"}))
		if mod != nil {
			mod(h)
		}
		return h
	}
	for _, tt := range []struct {
		name   string
		mod    func(http.Header)
		status int
		reason contract.Reason
	}{
		{"signed", nil, http.StatusSwitchingProtocols, ""},
		{"with a peer", func(h http.Header) { h.Set(contract.HeaderPeer, "node-a") }, 403, contract.ReasonIdentityHeaderInvalid},
		{"with a key", func(h http.Header) { h.Set(contract.HeaderPublicKey, testKey(1).Base64()) }, 403, contract.ReasonIdentityHeaderInvalid},
		{"binding repeated", func(h http.Header) { h.Add(contract.HeaderBinding, contract.BindingBounce) }, 403, contract.ReasonIdentityHeaderInvalid},
		{"unsigned", func(h http.Header) { h.Del(contract.HeaderSignature) }, 403, contract.ReasonIdentitySignatureMissing},
		{"client address changed", func(h http.Header) { h.Set(contract.HeaderClientAddress, "198.51.100.9") }, 403, contract.ReasonIdentitySignatureInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions("127.0.0.1:1")
			o.IdentityKeysFile = testutil.PublishKeys(t, key)
			srv := mustNew(t, o, &testutil.SyncBuffer{}, prometheus.NewRegistry())
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			d := websocket.Dialer{Subprotocols: []string{contract.Subprotocol}}
			ws, resp, err := d.Dial("ws"+ts.URL[len("http"):]+"/relay", bounceHeaders(tt.mod))
			if ws != nil {
				defer ws.Close()
			}
			if resp == nil {
				t.Fatalf("dial: %v", err)
			}
			if resp.StatusCode != tt.status || resp.Header.Get(contract.HeaderDenyReason) != string(tt.reason) {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, resp.Header.Get(contract.HeaderDenyReason), tt.status, tt.reason)
			}
			if ws == nil {
				return
			}
			_, _, err = ws.ReadMessage()
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.CloseTryAgainLater || ce.Text != string(contract.CloseReplicaFull) {
				t.Errorf("after the upgrade: %v, want close 1013 replica_full", err)
			}
		})
	}
}

// TestBounceCloseSurvivesClientBytes: an agent writes its Register (and
// more) right after the upgrade, before it reads; the bounce's close frame
// must still reach it, and the connection end with FIN, never a reset
// (closing a socket with unread bytes makes Linux send RST, and the agent
// would read 1006).
func TestBounceCloseSurvivesClientBytes(t *testing.T) {
	h := startBridge(t, func(o *Options) { o.MaxSessions, o.UnreadyAt, o.WriteTimeout = 2, 50, time.Minute })
	h.srv.closeGrace = time.Minute
	h.srv.bounceDice = func() float64 { return 0 }
	h.register(t, testKey(1)) // the mark: 1 of 2
	ws := h.dial(t, identity(testKey(2)))
	if err := ws.WriteMessage(websocket.BinaryMessage, relayproto.AppendRegister(nil, testKey(2))); err != nil {
		t.Fatalf("write the Register: %v", err)
	}
	for range 10 {
		if err := ws.WriteMessage(websocket.BinaryMessage, make([]byte, 16<<10)); err != nil {
			t.Fatalf("write after the upgrade: %v", err)
		}
	}
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseTryAgainLater || ce.Text != string(contract.CloseReplicaFull) {
		t.Fatalf("want close 1013 replica_full, got %v", err)
	}
	var b [64]byte
	if n, err := ws.NetConn().Read(b[:]); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("after the close frame: %d bytes, %v; want EOF", n, err)
	}
}
