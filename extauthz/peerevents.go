package extauthz

import (
	"github.com/wirekube/relay-ws/extauthz/internal/events"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenverify"
	"github.com/wirekube/relay-ws/internal/contract"
)

// peerEvents hands the decision's refusals and the hub's revocations to
// the Events room (internal/events), which decides what is written; a nil
// recorder records nothing. Neither call blocks.
type peerEvents struct{ rec *events.Recorder }

// Refused records d if its reason is one the operator must act on.
func (p peerEvents) Refused(d Decision) {
	if p.rec == nil || d.Allowed() {
		return
	}
	p.rec.Refused(events.Refusal{Reason: d.Reason, Peer: d.Peer, KeyFingerprint: d.KeyFingerprint,
		FirstHolder: d.firstHolder, ClaimedNode: d.ClaimedNode, TokenExpired: d.Detail == tokenverify.DetailExpired,
		Admissible: d.admissible})
}

// Revoked records that a live session of peer was closed for r.
func (p peerEvents) Revoked(peer string, r contract.Reason) { p.rec.Revoked(peer, r) }
