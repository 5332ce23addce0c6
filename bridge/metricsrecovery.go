package bridge

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// recoveryMetrics are the collectors of the relay hold, the per-peer
// limits, the probe mode and the key-mismatch backoff.
type recoveryMetrics struct {
	relayHeld         prometheus.Gauge
	holdDuration      *prometheus.HistogramVec // outcome
	probes            *prometheus.CounterVec   // result
	keyBackoffStrikes prometheus.Counter
}

// Outcomes of wirekube_bridge_relay_hold_duration_seconds.
var holdOutcomes = []string{"relay_up", "timeout", "client_gone", "draining", "refused"}

// registerRecovery creates and registers the collectors; the gauges of
// current state read s when scraped.
func (m *metrics) registerRecovery(reg prometheus.Registerer, s *Server) error {
	const ns = "wirekube_bridge"
	m.relayHeld = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "relay_held_requests",
		Help: "Upgrades held unanswered while the relay is unreachable (--relay-wait)."})
	m.holdDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "relay_hold_duration_seconds",
		Help:    "Time upgrades were held waiting for the relay, by outcome.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8}}, []string{"outcome"})
	m.probes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "probe_sessions_total",
		Help: "Probe-mode sessions (subprotocol wirekube.relay.probe.v1) by result."}, []string{"result"})
	m.keyBackoffStrikes = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "key_mismatch_strikes_total",
		Help: "Register key mismatches that started or lengthened an identity's backoff window."})
	backoffLen := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "key_mismatch_backoff_identities",
		Help: "Identities remembered by the key-mismatch backoff (bounded LRU)."},
		func() float64 { return float64(s.backoff.len()) })
	peers := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "peers_active",
		Help: "WireKubePeers with at least one admitted request (per-peer limits)."},
		func() float64 { return float64(s.peers.len()) })
	for _, c := range []prometheus.Collector{m.relayHeld, m.holdDuration, m.probes, m.keyBackoffStrikes, backoffLen, peers} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	for _, o := range holdOutcomes {
		m.holdDuration.WithLabelValues(o)
	}
	return nil
}

func (m *metrics) observeHold(d time.Duration, outcome string) {
	m.holdDuration.WithLabelValues(outcome).Observe(d.Seconds())
}
