package tokenreview

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/extauthz/internal/reviewgate"
	"github.com/wirekube/relay-ws/internal/contract"
)

// metricsNamespace prefixes every extauthz metric name.
const metricsNamespace = contract.MetricsNamespaceExtauthz

// metrics are the collectors of TokenReview: its calls, failures, cache,
// outage and the review gate's refusals. They are registered on the
// registry of Config.Reg, never on the global default.
type metrics struct {
	reviews        *prometheus.CounterVec
	reviewDuration prometheus.Histogram
	reviewFailures *prometheus.CounterVec // category (failures.go)
	cacheHits      prometheus.Counter
	cacheMisses    prometheus.Counter
	cacheNegHits   prometheus.Counter
	inflight       prometheus.Gauge
	reviewOutage   prometheus.Gauge       // outage.go
	gateRefusals   *prometheus.CounterVec // by cause (internal/reviewgate)
}

func newMetrics(reg prometheus.Registerer, cacheLen func() int) (*metrics, error) {
	m := &metrics{
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
		reviewOutage: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "review_outage", Help: "1 while TokenReview calls fail (unreachable, timeout, 429, 5xx).",
		}),
		reviewFailures: newReviewFailures(),
		gateRefusals:   reviewgate.NewRefusals(),
	}
	entries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "cache_entries", Help: "Entries in the TokenReview cache.",
	}, func() float64 { return float64(cacheLen()) })
	for _, c := range []prometheus.Collector{m.reviews, m.reviewDuration, m.cacheHits, m.cacheMisses,
		m.cacheNegHits, m.inflight, entries, m.reviewOutage, m.reviewFailures, m.gateRefusals} {
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
