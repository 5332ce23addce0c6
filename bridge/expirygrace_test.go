package bridge

import (
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wirekube/relay-ws/bridge/internal/revocationclient"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// TestTokenExpiryGrace: a session whose token expires at exp closes with
// 1008 token_expired exactly at exp + --token-expiry-grace on the bubble's
// clock: not at exp (the grace ignored), not later. It is counted as an
// expiry, not as a revocation.
func TestTokenExpiryGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace = 30 * time.Second
		b := startBubble(t, func(o *Options) { o.TokenExpiryGrace = grace })
		k := testKey(1)
		// The header has whole seconds, and so has exp here.
		exp := time.Now().Truncate(time.Second).Add(time.Minute)
		hdr := identity(k)
		hdr.Set(contract.HeaderTokenExpires, exp.UTC().Format(time.RFC3339))
		d := websocket.Dialer{NetDialContext: b.ln.DialContext, Subprotocols: []string{contract.Subprotocol}}
		ws, _, err := d.Dial("ws://bridge/relay", hdr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer ws.Close()
		relayEnd := b.relay.next(t)
		send(t, ws, relayproto.AppendRegister(nil, k))
		if _, err := io.ReadFull(relayEnd, make([]byte, relayproto.HeaderSize+relayproto.KeySize)); err != nil {
			t.Fatalf("relay end: %v", err)
		}

		// The reader answers the bridge's pings, so nothing but the expiry
		// can end the session.
		var ce *websocket.CloseError
		for {
			if _, _, err = ws.ReadMessage(); err != nil {
				break
			}
		}
		closedAt := time.Now()
		if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || ce.Text != string(contract.CloseTokenExpired) {
			t.Fatalf("session ended with %v, want 1008 %s", err, contract.CloseTokenExpired)
		}
		if want := exp.Add(grace); !closedAt.Equal(want) {
			t.Errorf("closed at %s, want exp + grace = %s (exp %s)", closedAt.UTC(), want.UTC(), exp.UTC())
		}
		ws.Close()
		synctest.Wait()
		if got := promtest.ToFloat64(b.srv.metrics.sessions.WithLabelValues(string(contract.CloseTokenExpired))); got != 1 {
			t.Errorf("sessions_total{result=token_expired} = %v, want 1", got)
		}
		if got := promtest.ToFloat64(b.srv.revoker.AuthCloses(revocationclient.CauseTokenExpired)); got != 1 {
			t.Errorf("authorization_closes_total{cause=token_expired} = %v, want 1", got)
		}
		if got := promtest.ToFloat64(b.srv.revoker.AuthCloses(revocationclient.CauseRevoked)); got != 0 {
			t.Errorf("authorization_closes_total{cause=revoked} = %v, want 0", got)
		}
	})
}
