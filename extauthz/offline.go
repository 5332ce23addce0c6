package extauthz

import (
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

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

// outage tracks whether TokenReview answers, for verify-offline. since is
// the time (unix ns) of the first failure after the last answer; zero while
// the API answers. Safe for concurrent use.
type outage struct {
	since atomic.Int64
	gauge func(float64)
}

// answered records that the API answered (any answer, a refusal included:
// it is reachable).
func (o *outage) answered() {
	if o.since.Swap(0) != 0 {
		o.gauge(0)
	}
}

// failed records a failed call: the outage starts at the first one.
func (o *outage) failed(now time.Time) {
	if o.since.CompareAndSwap(0, now.UnixNano()) {
		o.gauge(1)
	}
}

// within reports whether an outage is on and started at most window ago.
func (o *outage) within(now time.Time, window time.Duration) bool {
	s := o.since.Load()
	return s != 0 && now.Sub(time.Unix(0, s)) <= window
}

// record classifies a TokenReview error. An API that answered with a
// refusal (401, 403, 400, 404, 422: a configuration problem, not an outage)
// is reachable; a transport error, a timeout, 429 or 5xx is an outage.
func (o *outage) record(err error, now time.Time) {
	if err == nil || reachableError(err) {
		o.answered()
		return
	}
	o.failed(now)
}

func reachableError(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	code := int(st.Status().Code)
	return code >= 400 && code < 500 && code != http.StatusTooManyRequests && code != http.StatusRequestTimeout
}

// reviewOffline is the verify-offline fallback of a review_unavailable
// answer: the review kube-apiserver would give for the verified claims,
// when the mode is on, the outage is inside the window and the token's
// binding can be checked locally. Otherwise the reason stands.
func (a *Authorizer) reviewOffline(c *tokenClaims, reason contract.Reason) (review, bool, contract.Reason) {
	if a.cfg.onUnavailable != UnavailableVerifyOffline || !a.outage.within(a.now(), a.cfg.offlineWindow) {
		return review{}, false, reason
	}
	rv, ok := c.offlineReview(a.cfg.audience)
	if !ok {
		return review{}, false, reason
	}
	return rv, true, ""
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
