package tokenreview

import (
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
