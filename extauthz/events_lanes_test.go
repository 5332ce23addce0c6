package extauthz

import (
	"context"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// TestCheckStrangerExpiredTokenRecordsNoEvent goes through a check: an
// expired token of a ServiceAccount no rule admits (default/stranger: a
// namespace editor can mint one), Node-bound to node-a, is refused 401
// token_invalid as any expired token, and writes no Event on node-a's
// WireKubePeer; the same expired token of node-a's agent still does.
func TestCheckStrangerExpiredTokenRecordsNoEvent(t *testing.T) {
	env := newEnv(t, nil)
	e := newEventsEnv(t, env.in)
	env.authz.events = e.ev
	stranger := tokenSpec{aud: []string{contract.DefaultAudience}, exp: env.clock.Now().Add(-time.Second),
		ns: "default", sa: "stranger", saUID: "uid-sa-stranger", node: &ref{"node-a", nodeAUID}}
	for range 10 {
		resp, err := env.srv.Check(context.Background(), relayCheck(stranger.sign(), nil))
		must(t, err)
		assertDenied(t, resp, contract.ReasonTokenInvalid)
	}
	e.drain(t)
	if got := e.events(t); len(got) != 0 {
		t.Fatalf("Events after 10 expired stranger tokens naming node-a: %+v, want none", got)
	}
	agent := agentSpec(env)
	agent.exp = env.clock.Now().Add(-time.Second)
	resp, err := env.srv.Check(context.Background(), relayCheck(agent.sign(), nil))
	must(t, err)
	assertDenied(t, resp, contract.ReasonTokenInvalid)
	e.drain(t)
	if got := e.events(t); len(got) != 1 || got[0].Reason != "token_expired" || got[0].InvolvedObject.Name != "node-a" {
		t.Fatalf("Events after node-a's agent's expired token: %+v, want one token_expired on node-a", got)
	}
}

// TestRevocationEventSurvivesRefusalFlood: 300 refusals of node-a, none
// written yet (the refusal queue of 256 overflows), then a revocation of
// node-a: the revocation is queued, and written as its own Event after
// every refusal was (the refusals' budget of node-a long spent).
func TestRevocationEventSurvivesRefusalFlood(t *testing.T) {
	e := newEventsEnv(t, eventRefs{})
	expired := Decision{Reason: contract.ReasonTokenInvalid, Detail: verifyExpired, ClaimedNode: "node-a", admissible: true}
	for range 300 {
		e.ev.Refused(expired)
	}
	e.ev.Revoked("node-a", contract.ClosePeerKeyChanged)
	if got := e.laneResult(laneRefusal, eventDropped); got != 300-eventsQueue {
		t.Fatalf("refusals dropped %v, want %d", got, 300-eventsQueue)
	}
	if got := e.laneResult(laneRevocation, eventDropped); got != 0 {
		t.Fatalf("revocations dropped %v, want 0", got)
	}
	e.drain(t) // the refusals first
	byReason := map[string]int32{}
	for _, ev := range e.events(t) {
		byReason[ev.Reason] += ev.Count
	}
	if byReason["token_expired"] != eventsBurst || byReason["peer_key_changed"] != 1 {
		t.Fatalf("Event counts on node-a %v, want token_expired %d (the burst) and peer_key_changed 1", byReason, eventsBurst)
	}
	if got := e.laneResult(laneRevocation, eventCreated); got != 1 {
		t.Fatalf("revocation lane created %v, want 1", got)
	}
}
