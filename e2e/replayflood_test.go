//go:build e2e

package e2e

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testagent"
)

// Replay cache of the flooded bridge: small, so that one agent could fill
// it in a second, and a max age no step of the test outlives.
const (
	floodCacheSize = 48
	floodPeerShare = 8
)

// testReplayFlood: one agent (one token, one WireKubePeer) floods a bridge
// with upgrades extauthz signed for it, as nginx forwards them. First
// refused ones (its per-peer session limit is full): more of them than the
// replay cache holds, each refused 429 peer_session_limit, none spending a
// nonce. Then admitted ones: exactly its share is answered 101 before it is
// refused 429 identity_replay_peer_share. Other agents are admitted on that
// bridge after each flood.
func (e *env) testReplayFlood(t *testing.T) {
	rep, err := e.stack.StartReplicas(context.Background(), "--register-timeout=5m", "--identity-signature-max-age=5m",
		"--identity-replay-cache-size="+strconv.Itoa(floodCacheSize), "--identity-replay-peer-share="+strconv.Itoa(floodPeerShare))
	fatalIf(t, err)
	t.Cleanup(func() { rep.Close() })
	to := func(h http.Header) testagent.Options {
		return testagent.Options{URL: "ws://" + rep.Bridge2Addr + contract.DefaultRelayPath, Header: h}
	}
	flooder := e.podAgent(t, "rc-flooder")
	held, err := testagent.Dial(context.Background(), to(e.extauthzAllow(t, flooder.token)), flooder.key)
	fatalIf(t, err)
	t.Cleanup(func() { held.Close() })
	alive(t, held, flooder.key)
	unregistered, err := testagent.DialRaw(context.Background(), to(e.extauthzAllow(t, flooder.token)))
	fatalIf(t, err) // the peer now holds --max-sessions-per-peer (2) sessions and 2 nonces

	for i := range floodCacheSize + 16 {
		c, err := testagent.DialRaw(context.Background(), to(e.extauthzAllow(t, flooder.token)))
		if err == nil {
			c.Close()
			t.Fatalf("refused flood, upgrade %d: admitted a third session of one peer", i)
		}
		checkDeny(t, err, http.StatusTooManyRequests, contract.ReasonPeerSessionLimit)
	}
	victim := e.podAgent(t, "rc-victim-1")
	e.admittedOn(t, to, victim)

	unregistered.Close()
	held.Close()
	if got := e.admittedUntilShare(t, to, flooder); got != floodPeerShare-2 {
		t.Fatalf("admitted flood: %d upgrades answered 101 before identity_replay_peer_share, want %d (the share less the 2 held before)",
			got, floodPeerShare-2)
	}
	e.admittedOn(t, to, e.podAgent(t, "rc-victim-2"))
}

// admittedOn dials id with a fresh extauthz answer and proves the session
// carries Data.
func (e *env) admittedOn(t *testing.T, to func(http.Header) testagent.Options, id identity) {
	t.Helper()
	c, err := testagent.Dial(context.Background(), to(e.extauthzAllow(t, id.token)), id.key)
	if err != nil {
		t.Fatalf("%s refused after the flood: %v", id.peer, err)
	}
	defer c.Close()
	alive(t, c, id.key)
}

// admittedUntilShare upgrades id again and again, closing each session,
// and returns how many were answered 101 before the first 429
// identity_replay_peer_share. A 429 of the per-peer session limits (the
// previous session not yet torn down) spends nothing and is tried again.
func (e *env) admittedUntilShare(t *testing.T, to func(http.Header) testagent.Options, id identity) int {
	t.Helper()
	admitted := 0
	for range 250 * floodPeerShare { // bounded; a retry costs milliseconds
		c, err := testagent.DialRaw(context.Background(), to(e.extauthzAllow(t, id.token)))
		if err == nil {
			admitted++
			c.Close()
			continue
		}
		var de *testagent.DialError
		switch {
		case errors.As(err, &de) && de.Reason == string(contract.ReasonIdentityReplayPeerShare):
			checkDeny(t, err, http.StatusTooManyRequests, contract.ReasonIdentityReplayPeerShare)
			return admitted
		case errors.As(err, &de) && (de.Reason == string(contract.ReasonPeerSessionLimit) ||
			de.Reason == string(contract.ReasonPeerUnregisteredLimit)):
		default:
			t.Fatalf("admitted flood, after %d admitted: %v", admitted, err)
		}
	}
	t.Fatalf("%s was never refused identity_replay_peer_share (%d admitted)", id.peer, admitted)
	return 0
}
