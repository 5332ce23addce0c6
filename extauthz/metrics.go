package extauthz

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
)

// This file holds the collectors of the checks: metrics (checks, degraded
// mode); TokenReview's, its cache's and the review gate's are the
// reviewer's (internal/tokenreview/metrics.go), the revocation stream's
// the hub's (internal/revocationhub/metrics.go). They are
// registered on the registry passed to NewAuthorizer and revocationhub.New,
// never on the global default.

// metricsNamespace prefixes every extauthz metric name.
const metricsNamespace = contract.MetricsNamespaceExtauthz

// metrics are the collectors of the checks.
type metrics struct {
	checks        *prometheus.CounterVec
	checkDuration *prometheus.HistogramVec
	offlineChecks *prometheus.CounterVec // degraded mode (internal/standin)
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
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
		offlineChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "offline_checks_total",
			Help: "Checks decided without TokenReview (--on-review-unavailable=verify-offline) by result (allow|deny).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.checks, m.checkDuration, m.offlineChecks} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observeCheck(frontend string, d Decision, elapsed time.Duration) {
	result, reason := d.result()
	m.checks.WithLabelValues(frontend, result, string(reason)).Inc()
	m.checkDuration.WithLabelValues(frontend, result).Observe(elapsed.Seconds())
}

// registerPeerKeyMetrics registers wirekube_extauthz_peer_keys_duplicate,
// read from dup at scrape time (the informers' key index).
func registerPeerKeyMetrics(reg prometheus.Registerer, dup func() int) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "peer_keys_duplicate",
		Help: "Public keys held by more than one WireKubePeer (each refused with peer_key_duplicate).",
	}, func() float64 { return float64(dup()) }))
}
