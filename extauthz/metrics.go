package extauthz

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
)

const metricPrefix = "wirekube_extauthz_"

// metrics holds every collector of the service. They are registered on the
// registry passed to NewAuthorizer, never on the global default.
type metrics struct {
	checks         *prometheus.CounterVec
	checkDuration  *prometheus.HistogramVec
	reviews        *prometheus.CounterVec
	reviewDuration prometheus.Histogram
	reviewFailures *prometheus.CounterVec // by category (reviewerr.go)
	cacheHits      prometheus.Counter
	cacheMisses    prometheus.Counter
	cacheNegHits   prometheus.Counter
	inflight       prometheus.Gauge
	// Local verification and degraded mode (jwks.go, offline.go).
	jwksRefreshes *prometheus.CounterVec
	jwksKeys      prometheus.Gauge
	offlineChecks *prometheus.CounterVec
	reviewOutage  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, cacheLen func() int) (*metrics, error) {
	m := &metrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "checks_total",
			Help: "Authorization checks by front end, result (allow|deny) and reason code.",
		}, []string{"frontend", "result", "reason"}),
		checkDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricPrefix + "check_duration_seconds",
			Help:    "Latency of one authorization check.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"frontend", "result"}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "token_reviews_total",
			Help: "TokenReview calls by result (authenticated|unauthenticated|error).",
		}, []string{"result"}),
		reviewDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    metricPrefix + "token_review_duration_seconds",
			Help:    "Latency of TokenReview calls.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricPrefix + "cache_hits_total", Help: "TokenReview cache hits of an authenticated answer.",
		}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricPrefix + "cache_misses_total", Help: "TokenReview cache misses.",
		}),
		cacheNegHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricPrefix + "cache_negative_hits_total", Help: "TokenReview cache hits of a not-authenticated answer.",
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: metricPrefix + "inflight_reviews", Help: "TokenReview calls in flight.",
		}),
	}
	m.addVerifyMetrics()
	m.reviewFailures = newReviewFailures()
	entries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metricPrefix + "cache_entries", Help: "Entries in the TokenReview cache.",
	}, func() float64 { return float64(cacheLen()) })
	for _, c := range []prometheus.Collector{m.checks, m.checkDuration, m.reviews, m.reviewDuration,
		m.cacheHits, m.cacheMisses, m.cacheNegHits, m.inflight, entries,
		m.jwksRefreshes, m.jwksKeys, m.offlineChecks, m.reviewOutage, m.reviewFailures} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) cacheHit(authenticated bool) {
	if authenticated {
		m.cacheHits.Inc()
	} else {
		m.cacheNegHits.Inc()
	}
}

func (m *metrics) observeReview(result string, d time.Duration) {
	m.reviews.WithLabelValues(result).Inc()
	m.reviewDuration.Observe(d.Seconds())
}

func (m *metrics) observeCheck(frontend string, d Decision, elapsed time.Duration) {
	result, reason := "allow", string(contract.ResultAllowed)
	if !d.Allowed() {
		result, reason = "deny", string(d.Reason)
	}
	m.checks.WithLabelValues(frontend, result, reason).Inc()
	m.checkDuration.WithLabelValues(frontend, result).Observe(elapsed.Seconds())
}

func (m *metrics) addVerifyMetrics() {
	m.jwksRefreshes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "jwks_refreshes_total",
		Help: "Fetches of the ServiceAccount signing keys by trigger (periodic|unknown_kid) and result (ok|error).",
	}, []string{"trigger", "result"})
	m.jwksKeys = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: metricPrefix + "jwks_keys", Help: "ServiceAccount token verification keys loaded.",
	})
	m.offlineChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "offline_checks_total",
		Help: "Checks decided without TokenReview (--on-review-unavailable=verify-offline) by result (allow|deny).",
	}, []string{"result"})
	m.reviewOutage = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: metricPrefix + "review_outage", Help: "1 while TokenReview calls fail (unreachable, timeout, 429, 5xx).",
	})
}
