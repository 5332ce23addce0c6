//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testagent"
	"github.com/wirekube/relay-ws/relayproto"
)

// testSessions: scenario 5. A reconnect of the same agent replaces its old
// session (the bridge closes the old one with 1008 session_replaced);
// no other identity can take the key.
func (e *env) testSessions(t *testing.T, f front) {
	id := e.podAgent(t, peerName(f, "s5-agent"))
	other := e.podAgent(t, peerName(f, "s5-other"))
	old := session(t, f, id)
	t.Run("reconnect_replaces_old_session", func(t *testing.T) {
		cur := session(t, f, id)
		wantClose(t, old, websocket.ClosePolicyViolation, contract.CloseSessionReplaced, ioTimeout)
		alive(t, cur, id.key)
		t.Run("no_other_identity_takes_the_key", func(t *testing.T) {
			c, err := testagent.DialRaw(context.Background(), f.opts(other))
			fatalIf(t, err)
			defer c.Close()
			fatalIf(t, c.WriteFrame(relayproto.TypeRegister, id.key[:]))
			wantClose(t, c, websocket.ClosePolicyViolation, contract.CloseRegisterKeyMismatch, ioTimeout)
			alive(t, cur, id.key)
			// The other identity still gets its own key.
			oc := session(t, f, other)
			exchange(t, oc, cur, other.key, id.key)
		})
	})
}

// testSpoofing: scenario 6. Client-supplied identity headers are stripped by
// the proxy before ext_authz and replaced by its answer.
func (e *env) testSpoofing(t *testing.T, f front) {
	victim := e.podAgent(t, peerName(f, "s6-victim"))
	victimConn := session(t, f, victim)
	id := e.podAgent(t, peerName(f, "s6-agent"))
	spoof := http.Header{
		contract.HeaderPeer:         {victim.peer},
		contract.HeaderPublicKey:    {victim.key.Base64()},
		contract.HeaderIdentity:     {"system:serviceaccount:wirekube-system:wirekube-agent"},
		contract.HeaderTokenExpires: {"2099-01-01T00:00:00Z"},
		"X-Wirekube-Peer":           {victim.peer, victim.peer},
	}
	t.Run("cannot_register_the_spoofed_key", func(t *testing.T) {
		o := f.opts(id)
		o.Header = spoof
		c, err := testagent.DialRaw(context.Background(), o)
		fatalIf(t, err)
		defer c.Close()
		fatalIf(t, c.WriteFrame(relayproto.TypeRegister, victim.key[:]))
		wantClose(t, c, websocket.ClosePolicyViolation, contract.CloseRegisterKeyMismatch, ioTimeout)
		alive(t, victimConn, victim.key)
	})
	t.Run("own_key_still_bound", func(t *testing.T) {
		o := f.opts(id)
		o.Header = spoof
		c, err := dialAgent(o, id.key)
		fatalIf(t, err)
		defer c.Close()
		exchange(t, c, victimConn, id.key, victim.key)
	})
	t.Run("spoofed_headers_without_token", func(t *testing.T) {
		wantRefused(t, testagent.Options{URL: f.url, TLS: f.tls, Header: spoof}, http.StatusUnauthorized, contract.ReasonTokenMissing)
	})
}
