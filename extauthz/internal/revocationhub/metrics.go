package revocationhub

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
)

// metrics are the revocation stream's collectors.
type metrics struct {
	revocations  *prometheus.CounterVec
	eventToSend  prometheus.Histogram
	refused      *prometheus.CounterVec // streams refused, by reason
	backpressure prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, counts func() (int, int)) (*metrics, error) {
	const ns = contract.MetricsNamespaceExtauthz
	m := &metrics{
		revocations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "revocations_total",
			Help: "Live-session bindings revoked on the revocation stream, by reason."}, []string{"reason"}),
		eventToSend: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "revocation_event_to_send_seconds",
			Help:    "Time from an informer event to the revocation it caused being sent to the bridge.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9)}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "revocation_streams_refused_total",
			Help: "Revocation streams refused: unauthenticated (no or a wrong secret) or streams_limit (--revocation-max-streams open)."},
			[]string{"reason"}),
		backpressure: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "revocation_backpressure_total",
			Help: "Times a revocation stream stopped reading because its bridge had 2048 ops pending that were not judged and answered yet."}),
	}
	for _, r := range []string{refusedUnauthenticated, refusedStreamsLimit} {
		m.refused.WithLabelValues(r)
	}
	streams := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "revocation_streams",
		Help: "Open revocation streams (one per connected bridge)."},
		func() float64 { s, _ := counts(); return float64(s) })
	bindings := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "revocation_bindings",
		Help: "Live-session bindings watched over every revocation stream."},
		func() float64 { _, b := counts(); return float64(b) })
	for _, c := range []prometheus.Collector{m.revocations, m.eventToSend, streams, bindings, m.refused, m.backpressure} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
