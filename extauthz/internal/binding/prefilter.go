package binding

import "strings"

// Admissible reports whether some configured rule of the path could admit
// the identity a token's verified claims name: on the relay path an agent
// ServiceAccount (--agent-service-account) or a per-peer one
// (--peer-namespace, --peer-service-account-prefix), on an authn-only path
// (authnOnly) an --allow-service-account. It runs after the signature
// verified and before TokenReview, so a token of any other ServiceAccount,
// which anyone with create serviceaccounts/token in some namespace can
// mint, is refused (identity_not_allowed, the answer the rules would give
// after the review) without spending the review budget.
//
// Both names a token carries count: the sub claim (subject) and the
// kubernetes.io namespace and serviceaccount name (ns, name), from which
// kube-apiserver builds the username. The token is refused only when
// neither could be admitted: the prefilter never refuses what the rules
// after the review would allow. It runs on every check, cache hits
// included, and allocates nothing.
func (r *Rules) Admissible(subject, ns, name string, authnOnly bool) bool {
	if sa, ok := ParseUsername(subject); ok && r.admits(sa, authnOnly) {
		return true
	}
	return ns != "" && name != "" && r.admits(ServiceAccount{ns, name}, authnOnly)
}

// admits reports whether a rule of the path could admit sa.
func (r *Rules) admits(sa ServiceAccount, authnOnly bool) bool {
	if authnOnly {
		return r.cfg.Allowed[sa]
	}
	return r.cfg.Agents[sa] || r.peerServiceAccount(sa)
}

// peerServiceAccount reports whether sa is a per-peer ServiceAccount: in
// --peer-namespace, named --peer-service-account-prefix plus a non-empty
// peer name (the rule of BindPeer).
func (r *Rules) peerServiceAccount(sa ServiceAccount) bool {
	return sa.Namespace == r.cfg.PeerNamespace && len(sa.Name) > len(r.cfg.PeerPrefix) &&
		strings.HasPrefix(sa.Name, r.cfg.PeerPrefix)
}
