package tokenreview

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/extauthz/internal/reviewgate"
)

// This file is the test seam of extauthz's tests, which check the cache,
// the gate and the counters through a real Authorizer and so cannot live
// in this package. Nothing outside tests calls it.

// Gate is the review gate every call passes.
func (r *Reviewer) Gate() *reviewgate.Gate { return r.gate }

// Expires is when the cached answer of k stops being served; false when
// none is cached.
func (r *Reviewer) Expires(k Key) (time.Time, bool) {
	e, ok := r.cache.Peek(k)
	return e.expires, ok
}

// SetExpires moves the end of the cached answer of k to at, if one is
// cached.
func (r *Reviewer) SetExpires(k Key, at time.Time) {
	if e, ok := r.cache.Peek(k); ok {
		e.expires = at
		r.cache.Add(k, e)
	}
}

// Failures is wirekube_extauthz_token_review_failures_total.
func (r *Reviewer) Failures() *prometheus.CounterVec { return r.metrics.reviewFailures }

// OutageGauge is wirekube_extauthz_review_outage.
func (r *Reviewer) OutageGauge() prometheus.Gauge { return r.metrics.reviewOutage }
