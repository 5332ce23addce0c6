package bridge

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// Directions of the frame and byte counters.
const (
	dirClientToRelay = "client_to_relay"
	dirRelayToClient = "relay_to_client"
)

// Reasons of wirekube_bridge_dropped_frames_total.
const dropUnknownType = "unknown_type"

// bridgeDenyReasons are the reasons the bridge answers before an upgrade.
func bridgeDenyReasons() []contract.Reason {
	return []contract.Reason{
		contract.ReasonMethodNotAllowed, contract.ReasonRequestBody, contract.ReasonNotWebSocket,
		contract.ReasonIdentityHeaderInvalid, contract.ReasonOriginNotAllowed, contract.ReasonSubprotocol,
		contract.ReasonDraining, contract.ReasonAtCapacity, contract.ReasonRelayUnavailable,
		// issue 14 and issue 11 item 4
		contract.ReasonRelayWaitFull, contract.ReasonPeerSessionLimit, contract.ReasonPeerUnregisteredLimit,
		contract.CloseRegisterKeyMismatch,
	}
}

// metrics are the bridge's Prometheus collectors, registered on the registry
// passed to New (never the global one).
type metrics struct {
	sessionsActive  prometheus.Gauge
	sessions        *prometheus.CounterVec // result
	sessionDuration prometheus.Histogram
	rejects         *prometheus.CounterVec // reason
	relayDial       *prometheus.HistogramVec
	dropped         *prometheus.CounterVec // reason
	droppedUnknown  prometheus.Counter
	recoveryMetrics // metricsrecovery.go
	// Binary messages by direction, resolved once.
	messagesToRelay, messagesToClient prometheus.Counter

	// Frame counters resolved once per type byte, so the hot path does no
	// label lookup. Indexed by the type byte; unknown bytes share "unknown".
	toRelay, toClient *[256]frameCounter
}

type frameCounter struct{ frames, bytes prometheus.Counter }

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns = "wirekube_bridge"
	m := &metrics{
		sessionsActive: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "sessions_active",
			Help: "Sessions currently upgraded (WebSocket open, relay connected)."}),
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "sessions_total",
			Help: "Ended sessions by result (the close reason, or client_closed)."}, []string{"result"}),
		sessionDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "session_duration_seconds",
			Help:    "Duration of ended sessions.",
			Buckets: []float64{0.1, 1, 10, 60, 300, 1800, 3600, 4 * 3600, 24 * 3600}}),
		rejects: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rejects_total",
			Help: "Requests to the relay path denied before the upgrade, by reason."}, []string{"reason"}),
		relayDial: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "relay_dial_duration_seconds",
			Help:    "Latency of dials to the raw relay (sessions and readiness probes) by result.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9)}, []string{"result"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "dropped_frames_total",
			Help: "Client frames dropped without closing the session, by reason."}, []string{"reason"}),
	}
	messages := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "messages_total",
		Help: "Binary WebSocket messages by direction."}, []string{"direction"})
	frames := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "frames_total",
		Help: "Relay frames by direction and type."}, []string{"direction", "type"})
	bytes := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "bytes_total",
		Help: "Relay frame bytes (header included) by direction and type."}, []string{"direction", "type"})
	for _, c := range []prometheus.Collector{m.sessionsActive, m.sessions, m.sessionDuration, m.rejects,
		m.relayDial, m.dropped, messages, frames, bytes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range bridgeDenyReasons() {
		m.rejects.WithLabelValues(string(r)) // export zeros for every reason the bridge answers
	}
	m.messagesToRelay = messages.WithLabelValues(dirClientToRelay)
	m.messagesToClient = messages.WithLabelValues(dirRelayToClient)
	m.droppedUnknown = m.dropped.WithLabelValues(dropUnknownType)
	m.toRelay = resolveFrameCounters(frames, bytes, dirClientToRelay)
	m.toClient = resolveFrameCounters(frames, bytes, dirRelayToClient)
	return m, nil
}

func resolveFrameCounters(frames, bytes *prometheus.CounterVec, dir string) *[256]frameCounter {
	var out [256]frameCounter
	for i := range out {
		label := relayproto.FrameType(i).String()
		out[i] = frameCounter{frames.WithLabelValues(dir, label), bytes.WithLabelValues(dir, label)}
	}
	return &out
}

func (m *metrics) observeDial(d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.relayDial.WithLabelValues(result).Observe(d.Seconds())
}
