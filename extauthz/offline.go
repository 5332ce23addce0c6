package extauthz

import (
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

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
func (a *Authorizer) reviewOffline(c *tokenverify.Claims, reason contract.Reason) (review, bool, contract.Reason) {
	if a.cfg.onUnavailable != UnavailableVerifyOffline || !a.outage.within(a.now(), a.cfg.offlineWindow) {
		return review{}, false, reason
	}
	rv, ok := offlineReview(c, a.cfg.audience)
	if !ok {
		return review{}, false, reason
	}
	return rv, true, ""
}

// offlineReview is the TokenReview answer kube-apiserver would give for
// verified claims, built locally for --on-review-unavailable=verify-offline.
// ok is false for a token whose binding cannot be checked from the
// informers (a Secret-bound token, a subject that is not its
// ServiceAccount): such a token is never admitted offline.
func offlineReview(c *tokenverify.Claims, audience string) (review, bool) {
	k := c.Kubernetes
	if k.Namespace == "" || k.ServiceAccount == nil || k.ServiceAccount.Name == "" || k.Secret != nil {
		return review{}, false
	}
	rv := review{
		authenticated: true,
		audiences:     []string{audience},
		username:      saUserPrefix + k.Namespace + ":" + k.ServiceAccount.Name,
		uid:           k.ServiceAccount.UID,
	}
	if c.Subject != rv.username {
		return review{}, false
	}
	if k.Pod != nil {
		rv.podName, rv.podUID = k.Pod.Name, k.Pod.UID
	}
	if k.Node != nil {
		rv.nodeName, rv.nodeUID = k.Node.Name, k.Node.UID
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
