package extauthz

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const metricPrefix = "wirekube_extauthz_"

// metrics holds every collector of the service. They are registered on the
// registry passed to NewAuthorizer, never on the global default.
type metrics struct {
	checks         *prometheus.CounterVec
	checkDuration  *prometheus.HistogramVec
	reviews        *prometheus.CounterVec
	reviewDuration prometheus.Histogram
	cacheHits      prometheus.Counter
	cacheMisses    prometheus.Counter
	cacheNegHits   prometheus.Counter
	inflight       prometheus.Gauge
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
	entries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metricPrefix + "cache_entries", Help: "Entries in the TokenReview cache.",
	}, func() float64 { return float64(cacheLen()) })
	for _, c := range []prometheus.Collector{m.checks, m.checkDuration, m.reviews, m.reviewDuration,
		m.cacheHits, m.cacheMisses, m.cacheNegHits, m.inflight, entries} {
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
	result, reason := "allow", string(reasonAllowed)
	if !d.Allowed() {
		result, reason = "deny", string(d.Reason)
	}
	m.checks.WithLabelValues(frontend, result, reason).Inc()
	m.checkDuration.WithLabelValues(frontend, result).Observe(elapsed.Seconds())
}
