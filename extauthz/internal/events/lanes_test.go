package events

import (
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
)

// TestRevocationEventSurvivesRefusalFlood: 300 refusals of node-a, none
// written yet (beyond the 8 of node-a's share of the refusal queue, none
// is queued), then a revocation of node-a: the revocation is queued, and
// written as its own Event after every refusal was (the refusals' budget
// of node-a long spent).
func TestRevocationEventSurvivesRefusalFlood(t *testing.T) {
	e := newEventsEnv(t, eventRefs{})
	expired := Refusal{Reason: contract.ReasonTokenInvalid, TokenExpired: true, ClaimedNode: "node-a", Admissible: true}
	for range 300 {
		e.ev.Refused(expired)
	}
	e.ev.Revoked("node-a", contract.ClosePeerKeyChanged)
	if got := e.laneResult(laneRefusal, eventShareFull); got != 300-8 {
		t.Fatalf("refusals over node-a's share %v, want %d", got, 300-8)
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

// TestRefusalBudgetPerReason: twenty peer_key_moved refusals of node-a
// spend that reason's budget (one Event, count 5), and node-a's expired
// token is still written as an Event of its own.
func TestRefusalBudgetPerReason(t *testing.T) {
	e := newEventsEnv(t, eventRefs{})
	for range 20 {
		e.ev.Refused(Refusal{Reason: contract.ReasonPeerKeyMoved, Peer: "node-a", KeyFingerprint: "8c0cc17a"})
		e.drain(t)
	}
	e.ev.Refused(Refusal{Reason: contract.ReasonTokenInvalid, TokenExpired: true, ClaimedNode: "node-a", Admissible: true})
	e.drain(t)
	counts := map[string]int32{}
	for _, ev := range e.events(t) {
		counts[ev.InvolvedObject.Name+" "+ev.Reason] += ev.Count
	}
	want := map[string]int32{"node-a peer_key_moved": 5, "node-a token_expired": 1}
	if len(counts) != len(want) || counts["node-a peer_key_moved"] != 5 || counts["node-a token_expired"] != 1 {
		t.Fatalf("Event counts %v, want %v", counts, want)
	}
}

// TestRefusalQueueSharePerObjectAndReason: 300 peer_key_moved refusals of
// node-a waiting to be written take 8 places of the refusal queue; node-a's
// expired token and node-c's duplicate key are still queued and written.
func TestRefusalQueueSharePerObjectAndReason(t *testing.T) {
	e := newEventsEnv(t, eventRefs{})
	for range 300 {
		e.ev.Refused(Refusal{Reason: contract.ReasonPeerKeyMoved, Peer: "node-a", KeyFingerprint: "8c0cc17a"})
	}
	e.ev.Refused(Refusal{Reason: contract.ReasonTokenInvalid, TokenExpired: true, ClaimedNode: "node-a", Admissible: true})
	e.ev.Refused(Refusal{Reason: contract.ReasonPeerKeyDuplicate, Peer: "node-c", KeyFingerprint: "8c0cc17a"})
	if got := e.laneResult(laneRefusal, eventDropped) + e.laneResult(laneRefusal, eventShareFull); got != 300-8 {
		t.Fatalf("refusals not queued %v, want %d (node-a's peer_key_moved beyond its 8)", got, 300-8)
	}
	e.drain(t)
	seen := map[string]bool{}
	for _, ev := range e.events(t) {
		seen[ev.InvolvedObject.Name+" "+ev.Reason] = true
	}
	for _, k := range []string{"node-a peer_key_moved", "node-a token_expired", "node-c peer_key_duplicate"} {
		if !seen[k] {
			t.Errorf("no Event %s; written: %v", k, seen)
		}
	}
}
