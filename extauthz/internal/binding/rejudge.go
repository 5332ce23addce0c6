package binding

import (
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
)

// Rejudge runs the identity rules of the relay path again on a binding,
// against the informer caches and this process's configuration, exactly as
// an upgrade is judged (BindPeer) with a token whose TokenReview answered
// these fields. It returns "" while the binding still holds, else the
// reason it no longer does: the deny reason of the failing rule,
// node_mismatch when the identity now leads to another peer (the Pod
// moved), peer_key_changed when the peer's key is another one. Safe for
// concurrent use.
func (r *Rules) Rejudge(b revocation.Binding) contract.Reason {
	s := Subject{Username: b.Identity, UID: b.SAUID,
		PodName: b.PodName, PodUID: b.PodUID, NodeName: b.NodeName, NodeUID: b.NodeUID}
	res := r.BindPeer(&s)
	if res.Reason != "" {
		return res.Reason
	}
	if res.Peer != b.Peer {
		return contract.ReasonNodeMismatch
	}
	// The binding as the header carries it to the bridge: one the header
	// cannot carry vouches for nothing (fail closed).
	now, err := revocation.ParseBinding(res.Binding.Format())
	if err != nil || now.KeySHA256 != b.KeySHA256 {
		return contract.ClosePeerKeyChanged
	}
	return ""
}
