package bridge

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
)

// revocationMetrics describe the revocation stream (docs/revocation.md).
// Sessions closed by a revocation are counted in sessions_total by their
// close reason.
type revocationMetrics struct {
	connected prometheus.Gauge
	resyncs   prometheus.Counter
	lag       prometheus.Histogram
}

func newRevocationMetrics(reg prometheus.Registerer) (*revocationMetrics, error) {
	const ns = "wirekube_bridge"
	m := &revocationMetrics{
		connected: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "revocation_stream_connected",
			Help: "1 while the revocation stream to extauthz is open and in sync (its full list acknowledged), else 0."}),
		resyncs: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "revocation_resyncs_total",
			Help: "Full lists of live sessions acknowledged by extauthz (each connect and reconnect)."}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "revocation_lag_seconds",
			Help:    "Time from the informer event in extauthz to the close of the session it revoked.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 10)}),
	}
	for _, c := range []prometheus.Collector{m.connected, m.resyncs, m.lag} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// sessionEndReasons are close reasons exported at zero in sessions_total so
// that alerts on them need no absent() guard.
func sessionEndReasons() []contract.Reason {
	return []contract.Reason{
		contract.CloseTokenExpired, contract.CloseSessionReplaced, contract.CloseRevocationStale,
		contract.CloseRevoked, contract.ClosePeerKeyChanged, contract.ReasonPodNotFound,
		contract.ReasonServiceAccountNotFound, contract.ReasonPeerNotFound, contract.ReasonNodeMismatch,
	}
}
