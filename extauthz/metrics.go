package extauthz

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/extauthz/internal/reviewgate"
)

// This file holds the collectors of the checks: metrics (checks,
// TokenReview, cache, verification, degraded mode); the revocation
// stream's are the hub's (internal/revocationhub/metrics.go). They are
// registered on the registry passed to NewAuthorizer and revocationhub.New,
// never on the global default.

// metricsNamespace prefixes every extauthz metric name.
const metricsNamespace = "wirekube_extauthz"

// metrics are the collectors of the checks.
type metrics struct {
	checks         *prometheus.CounterVec
	checkDuration  *prometheus.HistogramVec
	reviews        *prometheus.CounterVec
	reviewDuration prometheus.Histogram
	reviewFailures *prometheus.CounterVec // category (reviewerr.go)
	cacheHits      prometheus.Counter
	cacheMisses    prometheus.Counter
	cacheNegHits   prometheus.Counter
	inflight       prometheus.Gauge
	// Degraded mode (offline.go); the key set's are its room's
	// (internal/jwks/metrics.go).
	offlineChecks *prometheus.CounterVec
	reviewOutage  prometheus.Gauge
	gateRefusals  *prometheus.CounterVec // by cause (internal/reviewgate)
}

func newMetrics(reg prometheus.Registerer, cacheLen func() int) (*metrics, error) {
	m := &metrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "checks_total",
			Help: "Authorization checks by front end, result (allow|bounce|deny) and reason code.",
		}, []string{"frontend", "result", "reason"}),
		checkDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "check_duration_seconds",
			Help:    "Latency of one authorization check.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"frontend", "result"}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "token_reviews_total",
			Help: "TokenReview calls by result (authenticated|unauthenticated|error).",
		}, []string{"result"}),
		reviewDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "token_review_duration_seconds",
			Help:    "Latency of TokenReview calls.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "cache_hits_total", Help: "TokenReview cache hits of an authenticated answer.",
		}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "cache_misses_total", Help: "TokenReview cache misses.",
		}),
		cacheNegHits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "cache_negative_hits_total", Help: "TokenReview cache hits of a not-authenticated answer.",
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "inflight_reviews", Help: "TokenReview calls in flight.",
		}),
	}
	m.addVerifyMetrics()
	m.reviewFailures = newReviewFailures()
	m.gateRefusals = reviewgate.NewRefusals()
	entries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "cache_entries", Help: "Entries in the TokenReview cache.",
	}, func() float64 { return float64(cacheLen()) })
	for _, c := range []prometheus.Collector{m.checks, m.checkDuration, m.reviews, m.reviewDuration,
		m.cacheHits, m.cacheMisses, m.cacheNegHits, m.inflight, entries,
		m.offlineChecks, m.reviewOutage, m.reviewFailures, m.gateRefusals} {
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
	result, reason := d.result()
	m.checks.WithLabelValues(frontend, result, string(reason)).Inc()
	m.checkDuration.WithLabelValues(frontend, result).Observe(elapsed.Seconds())
}

func (m *metrics) addVerifyMetrics() {
	m.offlineChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "offline_checks_total",
		Help: "Checks decided without TokenReview (--on-review-unavailable=verify-offline) by result (allow|deny).",
	}, []string{"result"})
	m.reviewOutage = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "review_outage", Help: "1 while TokenReview calls fail (unreachable, timeout, 429, 5xx).",
	})
}

func newReviewFailures() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "token_review_failures_total",
		Help: "TokenReview calls that failed, and checks whose caller hung up while waiting for one (canceled), " +
			"by category: timeout, canceled, rate_limited (429), forbidden (403), unauthorized (401), " +
			"connection_refused, server_error (5xx), other.",
	}, []string{"category"})
	for _, cat := range reviewFailCategories {
		c.WithLabelValues(cat)
	}
	return c
}

// registerPeerKeyMetrics registers wirekube_extauthz_peer_keys_duplicate,
// read from dup at scrape time (the informers' key index).
func registerPeerKeyMetrics(reg prometheus.Registerer, dup func() int) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "peer_keys_duplicate",
		Help: "Public keys held by more than one WireKubePeer (each refused with peer_key_duplicate).",
	}, func() float64 { return float64(dup()) }))
}
