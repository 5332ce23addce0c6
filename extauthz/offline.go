package extauthz

import (
	"github.com/wirekube/relay-ws/extauthz/internal/tokenreview"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenverify"
	"github.com/wirekube/relay-ws/internal/contract"
)

// What to do when TokenReview cannot be reached (--on-review-unavailable).
const (
	// UnavailableDeny answers review_unavailable (503): fail closed. The
	// default.
	UnavailableDeny = "deny"
	// UnavailableVerifyOffline admits a token whose signature and claims
	// verify against the last JWKS and whose bound objects check out
	// against the informers' last state, for at most --offline-window after
	// TokenReview stopped answering. Revocation that only TokenReview sees
	// (a deleted Secret-bound token, kube-apiserver's own invalidation) is
	// not seen while offline.
	UnavailableVerifyOffline = "verify-offline"
)

// reviewOffline is the verify-offline fallback of a review_unavailable
// answer: the review kube-apiserver would give for the verified claims,
// when the mode is on, the outage is inside the window and the token's
// binding can be checked locally. Otherwise the reason stands.
func (a *Authorizer) reviewOffline(c *tokenverify.Claims, reason contract.Reason) (tokenreview.Answer, bool, contract.Reason) {
	if a.cfg.onUnavailable != UnavailableVerifyOffline || !a.reviewer.InOutage(a.cfg.offlineWindow) {
		return tokenreview.Answer{}, false, reason
	}
	rv, ok := offlineReview(c, a.cfg.audience)
	if !ok {
		return tokenreview.Answer{}, false, reason
	}
	return rv, true, ""
}

// offlineReview is the TokenReview answer kube-apiserver would give for
// verified claims, built locally for --on-review-unavailable=verify-offline.
// ok is false for a token whose binding cannot be checked from the
// informers (a Secret-bound token, a subject that is not its
// ServiceAccount): such a token is never admitted offline.
func offlineReview(c *tokenverify.Claims, audience string) (tokenreview.Answer, bool) {
	k := c.Kubernetes
	if k.Namespace == "" || k.ServiceAccount == nil || k.ServiceAccount.Name == "" || k.Secret != nil {
		return tokenreview.Answer{}, false
	}
	rv := tokenreview.Answer{
		Authenticated: true,
		Audiences:     []string{audience},
		Username:      saUserPrefix + k.Namespace + ":" + k.ServiceAccount.Name,
		UID:           k.ServiceAccount.UID,
	}
	if c.Subject != rv.Username {
		return tokenreview.Answer{}, false
	}
	if k.Pod != nil {
		rv.PodName, rv.PodUID = k.Pod.Name, k.Pod.UID
	}
	if k.Node != nil {
		rv.NodeName, rv.NodeUID = k.Node.Name, k.Node.UID
	}
	return rv, true
}

// observeOffline counts the checks decided offline.
func (a *Authorizer) observeOffline(d Decision) {
	if !d.Offline {
		return
	}
	result := "allow"
	if !d.Allowed() {
		result = "deny"
	}
	a.metrics.offlineChecks.WithLabelValues(result).Inc()
}
