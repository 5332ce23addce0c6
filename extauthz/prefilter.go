package extauthz

import (
	"strings"

	"github.com/wirekube/relay-ws/extauthz/internal/tokenverify"
)

// detailSubjectRefused is the log detail of a token refused before any API
// call because no configured rule admits the identity it names.
const detailSubjectRefused = "subject_not_admissible"

// admissible reports whether some configured rule of the path could admit
// the identity the verified claims name: on the relay path an agent
// ServiceAccount (--agent-service-account) or a per-peer one
// (--peer-namespace, --peer-service-account-prefix), on an authn-only path
// an --allow-service-account. It runs after the signature verified and
// before TokenReview, so a token of any other ServiceAccount, which anyone
// with create serviceaccounts/token in some namespace can mint, is refused
// (identity_not_allowed, the answer the rules would give after the review)
// without spending the review budget.
//
// Both names a token carries count: the sub claim and the
// kubernetes.io namespace and serviceaccount name, from which kube-apiserver
// builds the username. The token is refused only when neither could be
// admitted: the prefilter never refuses what the rules after the review
// would allow. It runs on every check, cache hits included, and allocates
// nothing.
func (a *Authorizer) admissible(c *tokenverify.Claims, kind pathKind) bool {
	if sa, ok := parseSAUsername(c.Subject); ok && a.admits(sa, kind) {
		return true
	}
	k := c.Kubernetes
	return k.Namespace != "" && k.ServiceAccount != nil && k.ServiceAccount.Name != "" &&
		a.admits(nsName{k.Namespace, k.ServiceAccount.Name}, kind)
}

// admits reports whether a rule of the path could admit sa.
func (a *Authorizer) admits(sa nsName, kind pathKind) bool {
	if kind == pathAuthnOnly {
		return a.cfg.allowSAs[sa]
	}
	return a.cfg.agentSAs[sa] || a.peerServiceAccount(sa)
}

// peerServiceAccount reports whether sa is a per-peer ServiceAccount: in
// --peer-namespace, named --peer-service-account-prefix plus a non-empty
// peer name (the rule of bindPeer).
func (a *Authorizer) peerServiceAccount(sa nsName) bool {
	return sa.ns == a.cfg.peerNamespace && len(sa.name) > len(a.cfg.peerPrefix) &&
		strings.HasPrefix(sa.name, a.cfg.peerPrefix)
}
