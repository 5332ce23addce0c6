package bridge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
	"github.com/wirekube/relay-ws/relayproto"
)

// The two ServiceAccounts that may hold node-a's key: the agent's and
// node-a's per-peer account (docs/revocation.md#identities).
const (
	agentSubject   = "system:serviceaccount:wirekube-system:wirekube-agent"
	perPeerSubject = "system:serviceaccount:wirekube-system:wirekube-relay-peer-node-a"
)

// boundAs is identity(k) as subject with an X-WireKube-Binding of that
// ServiceAccount and pod ("" for a token bound to no Pod), as extauthz
// sets them.
func boundAs(k relayproto.Key, subject, pod string) http.Header {
	h := identity(k)
	h.Set(contract.HeaderIdentity, subject)
	b := revocation.Binding{Identity: subject, SAUID: "uid-of-" + subject[len(subject)-8:],
		NodeName: "node-a", NodeUID: "node-a-uid", Peer: "node-a", KeySHA256: revocation.KeyHash(k[:])}
	if pod != "" {
		b.PodName, b.PodUID = pod, pod+"-uid"
	}
	h.Set(contract.HeaderBinding, b.Format())
	return h
}

// echoes proves ws's session live: Data to its own key comes back through
// the relay.
func echoes(t *testing.T, ws *websocket.Conn, k relayproto.Key) {
	t.Helper()
	payload := []byte("still the owner of this key")
	send(t, ws, relayproto.AppendFrame(nil, relayproto.TypeData, k[:], payload))
	fs := &frameStream{t: t, ws: ws}
	f := fs.next()
	if f.Type != relayproto.TypeData || !bytes.HasSuffix(f.Body, payload) {
		t.Fatalf("got %v %q, want the Data frame echoed", f.Type, f.Body)
	}
}

// refusedWith dials with hdr and expects 403 with reason before any upgrade.
func refusedWith(t *testing.T, url string, hdr http.Header, reason contract.Reason) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{contract.Subprotocol}, HandshakeTimeout: 5 * time.Second}
	ws, resp, err := d.Dial(url, hdr)
	if err == nil {
		ws.Close()
		t.Fatalf("upgraded, want 403 %s", reason)
	}
	if resp == nil || resp.StatusCode != http.StatusForbidden || resp.Header.Get(contract.HeaderDenyReason) != string(reason) {
		t.Fatalf("got %v (%v), want 403 %s", resp, err, reason)
	}
}

// TestReplaceOnlySameBinding: a second session for a key replaces the
// live one only when extauthz admitted both under the same binding (the
// agent's reconnect, half-open old session included); any other binding
// of the same peer is refused before the upgrade and the live session
// keeps the key.
func TestReplaceOnlySameBinding(t *testing.T) {
	k := testKey(1)
	noBinding := func(subject string) http.Header {
		h := identity(k)
		h.Set(contract.HeaderIdentity, subject)
		return h
	}
	for _, tc := range []struct {
		name          string
		first, second http.Header
		replaces      bool
	}{
		{"agent reconnect, same Pod", boundAs(k, agentSubject, "agent-x1"), boundAs(k, agentSubject, "agent-x1"), true},
		{"per-peer reconnect, unbound token", boundAs(k, perPeerSubject, ""), boundAs(k, perPeerSubject, ""), true},
		{"agent token, then per-peer token", boundAs(k, agentSubject, "agent-x1"), boundAs(k, perPeerSubject, ""), false},
		{"per-peer token, then agent token", boundAs(k, perPeerSubject, ""), boundAs(k, agentSubject, "agent-x1"), false},
		{"agent of another Pod", boundAs(k, agentSubject, "agent-x1"), boundAs(k, agentSubject, "agent-x2"), false},
		{"per-peer token bound to a Pod, then unbound", boundAs(k, perPeerSubject, "client-1"), boundAs(k, perPeerSubject, ""), false},
		{"no binding header, same identity", noBinding(agentSubject), noBinding(agentSubject), true},
		{"no binding header, other identity", noBinding(agentSubject), noBinding(perPeerSubject), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startBridge(t, nil)
			old := h.registeredAs(t, tc.first, k)
			if tc.replaces {
				cur := h.registeredAs(t, tc.second, k)
				expectClose(t, old, websocket.ClosePolicyViolation, contract.CloseSessionReplaced)
				echoes(t, cur, k)
				return
			}
			refusedWith(t, h.url, tc.second, contract.ReasonKeyHeldByOtherBinding)
			echoes(t, old, k)
			if n := promtest.ToFloat64(h.srv.metrics.rejects.WithLabelValues(string(contract.ReasonKeyHeldByOtherBinding))); n != 1 {
				t.Errorf("rejects_total{reason=key_held_by_other_binding} = %v, want 1", n)
			}
		})
	}
}

// TestRegisterRaceOtherBinding: two upgrades of different bindings both
// pass the check before the upgrade (no owner yet); the second to
// Register is closed 1008 key_held_by_other_binding, its Register never
// reaches the relay, and the log names both identities and Pods but no
// whole key.
func TestRegisterRaceOtherBinding(t *testing.T) {
	k := testKey(1)
	h := startBridge(t, nil)
	agent := h.dial(t, boundAs(k, agentSubject, "agent-x1"))
	perPeer := h.dial(t, boundAs(k, perPeerSubject, "client-7"))
	send(t, agent, relayproto.AppendRegister(nil, k))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.relay.WaitRegistered(ctx, k); err != nil {
		t.Fatal(err)
	}
	send(t, perPeer, relayproto.AppendRegister(nil, k))
	expectClose(t, perPeer, websocket.ClosePolicyViolation, contract.ReasonKeyHeldByOtherBinding)
	echoes(t, agent, k) // a Register that reached the relay would have replaced it
	logs := h.logs.String()
	line := ""
	for l := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(l, "key held by a live session of another binding") {
			line = l
		}
	}
	for _, want := range []string{`"at":"register"`, `"identity":"` + perPeerSubject + `"`, `"pod":"client-7"`,
		`"holder_identity":"` + agentSubject + `"`, `"holder_pod":"agent-x1"`, `"key":"` + k.Fingerprint() + `"`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %q", line, want)
		}
	}
	if strings.Contains(logs, k.Base64()) {
		t.Error("the logs hold the whole key")
	}
}

// dialAs is bubble.dial with hdr, returning the answer.
func (b *bubble) dialAs(hdr http.Header) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{NetDialContext: b.ln.DialContext, Subprotocols: []string{contract.Subprotocol},
		HandshakeTimeout: 5 * time.Second}
	return d.Dial("ws://bridge/relay", hdr)
}

// registerAs is bubble.register with hdr.
func (b *bubble) registerAs(t *testing.T, hdr http.Header, k relayproto.Key) (*websocket.Conn, io.Reader) {
	t.Helper()
	ws, _, err := b.dialAs(hdr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	relayEnd := b.relay.next(t)
	send(t, ws, relayproto.AppendRegister(nil, k))
	if _, err := io.ReadFull(relayEnd, make([]byte, relayproto.HeaderSize+relayproto.KeySize)); err != nil {
		t.Fatalf("relay end: %v", err)
	}
	return ws, relayEnd
}

// TestOtherBindingAdmittedOnceHolderSilent: a half-open session of another
// binding (revocation off: nothing else ends it) blocks the key only until
// its ping timeout, 3.25 ping intervals after its last sign of life; the
// next upgrade of the other binding is then admitted. Exact in a synctest
// bubble.
func TestOtherBindingAdmittedOnceHolderSilent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 40 * time.Millisecond
		k := testKey(1)
		b := startBubble(t, func(o *Options) { o.PingInterval = interval })
		_, relayEnd := b.registerAs(t, boundAs(k, agentSubject, "agent-old"), k) // never reads: answers no ping
		start := time.Now()
		newPod := boundAs(k, agentSubject, "agent-new")
		time.Sleep(3 * interval)
		if ws, resp, err := b.dialAs(newPod); err == nil {
			ws.Close()
			t.Fatal("admitted while the old session was within its ping timeout")
		} else if resp == nil || resp.Header.Get(contract.HeaderDenyReason) != string(contract.ReasonKeyHeldByOtherBinding) {
			t.Fatalf("dial: %v, want 403 key_held_by_other_binding", err)
		}
		if _, err := relayEnd.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("relay end: %v, want EOF at the ping timeout", err)
		}
		if d, want := time.Since(start), 3*interval+interval/4; d != want {
			t.Errorf("old session ended %s after its last sign of life, want %s", d, want)
		}
		b.registerAs(t, newPod, k)
	})
}

// TestEndedHolderHoldsNothing: a session of another binding that has ended
// (its relay connection closed) but is still lingering on its close frame
// no longer holds the key.
func TestEndedHolderHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := testKey(1)
		b := startBubble(t, nil)
		old, relayEnd := b.registerAs(t, boundAs(k, perPeerSubject, ""), k)
		send(t, old, relayproto.AppendFrame(nil, relayproto.TypeError, nil)) // 1008 frame_forbidden; old never reads the close
		if _, err := relayEnd.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("relay end: %v, want EOF", err)
		}
		b.registerAs(t, boundAs(k, agentSubject, "agent-x1"), k)
	})
}

// TestReplacementDoesNotWaitForTheOldClose: the Register of a same-binding
// replacement reaches the relay at the instant it is sent, even when the
// replaced client has stopped reading (its close frame cannot be written:
// the pipe holds no bytes); the replaced client still reads 1008
// session_replaced once it reads again. Exact in a synctest bubble.
func TestReplacementDoesNotWaitForTheOldClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := testKey(1)
		b := startBubble(t, nil)
		hdr := boundAs(k, agentSubject, "agent-a")
		old, _ := b.registerAs(t, hdr, k) // reads nothing until the end
		start := time.Now()
		b.registerAs(t, hdr, k)
		if d := time.Since(start); d != 0 {
			t.Errorf("the replacement's Register reached the relay %s after it was sent, want at once", d)
		}
		expectClose(t, old, websocket.ClosePolicyViolation, contract.CloseSessionReplaced)
	})
}
