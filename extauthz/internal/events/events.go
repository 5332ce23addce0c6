// Package events records Kubernetes Events on the WireKubePeer
// (docs/extauthz.md#events): when extauthz revokes a live session, or
// refuses an upgrade for a reason the operator must fix on the peer,
// `kubectl describe wkpeer NAME` shows it.
//
// The pipeline is ours, the rate limit is client-go's: tools/record's
// EventCorrelator (spam filter per object, aggregation, counting of repeats)
// decides what is written, but not its broadcaster, whose queue drops
// without telling its caller and which retries a failing write 12 times,
// 10 s apart. Here a full queue and a failed write are both counted
// (wirekube_extauthz_peer_events_total), a write is tried once, and nothing
// on the check path waits for any of it.
package events

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/wirekube/relay-ws/internal/contract"
)

// Revoked records that extauthz closed a live session of peer for r.
func (e *Recorder) Revoked(peer string, r contract.Reason) {
	if e == nil || peer == "" {
		return
	}
	e.record(e.revocations, peer, r, revokedType(r), "relay session revoked: "+reasonText(r))
}

// Refusal is what the Events need of a refused upgrade.
type Refusal struct {
	// Reason is the deny code ("" on allow: nothing is recorded).
	Reason contract.Reason
	// Peer is the bound WireKubePeer; KeyFingerprint its key's short
	// fingerprint.
	Peer           string
	KeyFingerprint string
	// FirstHolder owns the key of a peer_key_moved refusal: its
	// WireKubePeer (or Node) gets the Event too.
	FirstHolder string
	// ClaimedNode is the node the signature-verified claims of a refused
	// token name; TokenExpired reports the token was refused for its exp.
	ClaimedNode  string
	TokenExpired bool
	// Admissible: the verified claims name an identity some rule could
	// admit (the prefilter's answer). Only such a refusal may choose the
	// object an Event is written on.
	Admissible bool
}

// Refused records a refused upgrade whose reason the operator must act on
// (refusalEvent, and an expired token naming a node: Event reason
// token_expired); other denies record nothing.
func (e *Recorder) Refused(d Refusal) {
	if e == nil {
		return
	}
	if d.Reason == contract.ReasonTokenInvalid && d.TokenExpired && d.ClaimedNode != "" {
		// The cluster signed it for this node's agent, and it is past its
		// exp: kubelet did not refresh the projected token, or the agent
		// reads a stale file. The node is from signature-verified claims,
		// but anyone who may create a token of some ServiceAccount can
		// have one signed naming any node: only a token of an identity a
		// rule could admit (d.Admissible) chooses the object, else a
		// stranger would write Events on every peer.
		if !d.Admissible {
			return
		}
		e.record(e.refusals, d.ClaimedNode, contract.CloseTokenExpired, corev1.EventTypeWarning,
			"relay upgrade refused: the agent's token has expired and was not refreshed (token_invalid, expired)")
		return
	}
	if d.Peer == "" || !refusalEvent(d.Reason) {
		return
	}
	msg := "relay upgrade refused: " + reasonText(d.Reason)
	if d.KeyFingerprint != "" {
		msg += " (key " + d.KeyFingerprint + ")"
	}
	e.record(e.refusals, d.Peer, d.Reason, corev1.EventTypeWarning, msg)
	if d.Reason == contract.ReasonPeerKeyMoved && d.FirstHolder != "" {
		// The owner of the key: its node should know that another
		// WireKubePeer now carries it. The refused peer is named: the
		// Event is about it, not against the owner.
		e.record(e.refusals, d.FirstHolder, d.Reason, corev1.EventTypeWarning,
			"relay upgrade of WireKubePeer "+d.Peer+" refused: it holds a key published first here (peer_key_moved) (key "+
				d.KeyFingerprint+")")
	}
}

// refusalEvent reports the deny reasons that record an Event: the peer's
// key is unusable or shared, the peer is missing, or another binding's live
// session holds the peer's key (a second identity in use for one node). A
// bad token, a limit or an outage is the agent's or the gateway's business,
// in the logs and metrics.
func refusalEvent(r contract.Reason) bool {
	switch r {
	case contract.ReasonPeerKeyDuplicate, contract.ReasonPeerKeyInvalid, contract.ReasonPeerNotFound,
		contract.ReasonKeyHeldByOtherBinding, contract.ReasonPeerKeyMoved:
		return true
	}
	return false
}

// revokedType: an agent Pod replaced (a DaemonSet rollout) is routine; every
// other revocation needs a look.
func revokedType(r contract.Reason) string {
	if r == contract.ReasonPodNotFound || r == contract.ReasonPodUIDMismatch {
		return corev1.EventTypeNormal
	}
	return corev1.EventTypeWarning
}

// reasonText is the Event message's explanation of r: fixed text, never a
// value from the request.
func reasonText(r contract.Reason) string {
	var text string
	switch r {
	case contract.ReasonPeerKeyDuplicate:
		text = "spec.publicKey is also the key of another WireKubePeer"
	case contract.ReasonPeerKeyInvalid:
		text = "spec.publicKey is not a WireGuard public key"
	case contract.ReasonPeerKeyMoved:
		text = "spec.publicKey was published first by another node or WireKubePeer, which still exists"
	case contract.ReasonPeerNotFound:
		text = "no WireKubePeer of this name"
	case contract.ReasonKeyHeldByOtherBinding:
		text = "a live session of another identity, Pod or Node holds this peer's key"
	case contract.ClosePeerKeyChanged:
		text = "spec.publicKey changed"
	case contract.ReasonPodNotFound:
		text = "the agent Pod is gone"
	case contract.ReasonPodUIDMismatch:
		text = "the agent Pod was replaced"
	case contract.ReasonNodeMismatch:
		text = "the Node is gone or the identity now leads elsewhere"
	default:
		text = "the session's authorization no longer holds"
	}
	return text + " (" + string(r) + ")"
}
