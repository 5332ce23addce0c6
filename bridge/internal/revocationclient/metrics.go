package revocationclient

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
)

// metrics describe the revocation stream (docs/revocation.md). Sessions
// closed by a revocation are counted in the bridge's sessions_total by
// their close reason.
type metrics struct {
	connected prometheus.Gauge
	resyncs   prometheus.Counter
	lag       prometheus.Histogram
	// authCloses counts the sessions closed because their authorization
	// ended, by cause: the token's expiry (the hourly close of every agent
	// with WireKube's 3,600 s tokens, docs/revocation.md#token-expiry) apart
	// from extauthz's revocations and the stale-stream closes.
	authCloses *prometheus.CounterVec
}

// metricsNamespace is the bridge's, whose metrics these are.
const metricsNamespace = contract.MetricsNamespaceBridge

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns = metricsNamespace
	m := &metrics{
		connected: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "revocation_stream_connected",
			Help: "1 while the revocation stream to extauthz is open and in sync (its full list acknowledged), else 0."}),
		resyncs: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "revocation_resyncs_total",
			Help: "Full lists of live sessions acknowledged by extauthz (each connect and reconnect)."}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "revocation_lag_seconds",
			Help:    "Time from the informer event in extauthz to the close of the session it revoked.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 10)}),
		authCloses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "authorization_closes_total",
			Help: "Sessions closed because their authorization ended, by cause: token_expired (the token's exp + --token-expiry-grace), revoked (extauthz revoked the binding), revocation_stale."},
			[]string{"cause"}),
	}
	for _, c := range []string{CauseTokenExpired, CauseRevoked, CauseRevocationStale} {
		m.authCloses.WithLabelValues(c)
	}
	for _, c := range []prometheus.Collector{m.connected, m.resyncs, m.lag, m.authCloses} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
