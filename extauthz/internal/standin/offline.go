// Package standin is what stands in for TokenReview when it cannot answer:
// the offline review of --on-review-unavailable=verify-offline (the answer
// kube-apiserver would give for verified claims, inside --offline-window
// of an outage) and the admission of --on-review-throttled=review-after
// with the TokenReview it owes, made afterwards (followup.go; the queue is
// extauthz/internal/reviewafter). It knows no Decision: extauthz turns its
// answers into one.
package standin

import (
	"time"

	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
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

// Config is what the stand-ins read: the two flags' modes, the window, the
// audience, whether TokenReview has been unreachable for at most a window
// (tokenreview.Reviewer.InOutage) and the follow-up queue (nil under
// --on-review-throttled=deny).
type Config struct {
	OnUnavailable string
	OfflineWindow time.Duration
	Audience      string
	InOutage      func(window time.Duration) bool
	After         *After
}

// StandIns answers for TokenReview when it cannot.
type StandIns struct{ cfg Config }

// New returns the stand-ins of cfg.
func New(cfg Config) *StandIns { return &StandIns{cfg: cfg} }

// Stand is what stands in for a TokenReview that answered reason
// (review_unavailable or review_throttled; any other reason stands): the
// offline review, else on the relay path the review-after admission.
// offline or owed says which; a reason left is the answer.
func (s *StandIns) Stand(c *tokenverify.Claims, relay bool, reason contract.Reason) (rv tokenreview.Answer, offline, owed bool, _ contract.Reason) {
	if reason == contract.ReasonReviewUnavailable || reason == contract.ReasonReviewThrottled {
		// Throttled during an outage too: the calls that pass the gate
		// probe the API; the others need not wait for it to fail.
		rv, offline, reason = s.reviewOffline(c, reason)
	}
	if reason == contract.ReasonReviewThrottled {
		rv, owed, reason = s.reviewThrottledAfter(c, relay, reason)
	}
	return rv, offline, owed, reason
}

// reviewOffline is the verify-offline fallback of a review_unavailable
// answer: the review kube-apiserver would give for the verified claims,
// when the mode is on, the outage is inside the window and the token's
// binding can be checked locally. Otherwise the reason stands.
func (s *StandIns) reviewOffline(c *tokenverify.Claims, reason contract.Reason) (tokenreview.Answer, bool, contract.Reason) {
	if s.cfg.OnUnavailable != UnavailableVerifyOffline || !s.cfg.InOutage(s.cfg.OfflineWindow) {
		return tokenreview.Answer{}, false, reason
	}
	rv, ok := offlineReview(c, s.cfg.Audience)
	if !ok {
		return tokenreview.Answer{}, false, reason
	}
	return rv, true, ""
}

// reviewThrottledAfter is the review-after fallback of a review_throttled
// answer on the relay path: the review the verified claims stand for, when
// the mode is on and the claims can be bound locally. Otherwise the reason
// stands.
func (s *StandIns) reviewThrottledAfter(c *tokenverify.Claims, relay bool, reason contract.Reason) (tokenreview.Answer, bool, contract.Reason) {
	if s.cfg.After == nil || reason != contract.ReasonReviewThrottled || !relay {
		return tokenreview.Answer{}, false, reason
	}
	rv, ok := offlineReview(c, s.cfg.Audience)
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
		Username:      revocationhub.ServiceAccountPrefix + k.Namespace + ":" + k.ServiceAccount.Name,
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
