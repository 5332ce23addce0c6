package extauthz

import (
	"time"

	"github.com/wirekube/relay-ws/extauthz/internal/tokenreview"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
	"github.com/wirekube/relay-ws/relayproto"
)

// bindingOf is the X-WireKube-Binding of an allow answer: the TokenReview
// fields bindPeer read, and the peer and key hash it led to. node is the
// node checkBound resolved: for a Pod-bound token that names no Node (older
// API servers) it is the Pod's node, so that deleting that Node re-judges
// the binding; re-judging it then checks the same Pod-on-Node rule.
func bindingOf(rv *tokenreview.Answer, node, peer string, key relayproto.Key) revocation.Binding {
	return revocation.Binding{
		Identity: rv.Username, SAUID: rv.UID,
		PodName: rv.PodName, PodUID: rv.PodUID, NodeName: node, NodeUID: rv.NodeUID,
		Peer: peer, KeySHA256: revocation.KeyHash(key[:]),
	}
}

// Rejudge runs the identity rules of the relay path again on a binding,
// against the informer caches and this process's configuration, exactly as
// an upgrade would be judged with a token whose TokenReview answered these
// fields. It returns "" while the binding still holds, else the reason it
// no longer does: the deny reason of the failing rule, node_mismatch when
// the identity now leads to another peer (the Pod moved), peer_key_changed
// when the peer's key is another one. It is the revocation hub's Judge (internal/revocationhub). Safe for
// concurrent use.
func (a *Authorizer) Rejudge(b revocation.Binding) contract.Reason {
	if a.after != nil && a.after.Distrusted(b) {
		return contract.ReasonTokenInvalid // its follow-up TokenReview failed (reviewafter.go)
	}
	rv := tokenreview.Answer{
		Authenticated: true, Audiences: []string{a.cfg.audience},
		Username: b.Identity, UID: b.SAUID,
		PodName: b.PodName, PodUID: b.PodUID, NodeName: b.NodeName, NodeUID: b.NodeUID,
	}
	d := a.bindPeer(&rv, time.Time{})
	if !d.Allowed() {
		return d.Reason
	}
	if d.Peer != b.Peer {
		return contract.ReasonNodeMismatch
	}
	for _, h := range d.Headers {
		if h.Name != contract.HeaderBinding {
			continue
		}
		now, err := revocation.ParseBinding(h.Value)
		if err != nil || now.KeySHA256 != b.KeySHA256 {
			return contract.ClosePeerKeyChanged
		}
		return ""
	}
	return contract.CloseRevoked // bindPeer allowed without a binding: cannot vouch (fail closed)
}
