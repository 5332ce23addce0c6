package bridge

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// This file holds every collector of the bridge. Each group has a struct and
// a constructor newXMetrics(reg) that creates, registers and pre-labels its
// collectors on the registry passed to New (never the global one); the
// gauges that read the Server's state when scraped are registered by
// registerStateMetrics once the Server exists.

// metricsNamespace prefixes every bridge metric name.
const metricsNamespace = contract.MetricsNamespaceBridge

// Directions of the frame and byte counters.
const (
	dirClientToRelay = "client_to_relay"
	dirRelayToClient = "relay_to_client"
)

// Reasons of wirekube_bridge_dropped_frames_total.
const dropUnknownType = "unknown_type"

// Outcomes of wirekube_bridge_relay_hold_duration_seconds.
var holdOutcomes = []string{"relay_up", "timeout", "client_gone", "draining", "refused"}

// bridgeDenyReasons are the reasons the bridge answers before an upgrade.
func bridgeDenyReasons() []contract.Reason {
	return []contract.Reason{
		contract.ReasonRequestBody, contract.ReasonNotWebSocket,
		contract.ReasonIdentityHeaderInvalid, contract.ReasonOriginNotAllowed, contract.ReasonSubprotocol,
		contract.ReasonDraining, contract.ReasonAtCapacity, contract.ReasonRelayUnavailable,
		// the relay wait and the per-peer limits
		contract.ReasonRelayWaitFull, contract.ReasonPeerSessionLimit, contract.ReasonPeerUnregisteredLimit,
		contract.CloseRegisterKeyMismatch, contract.ReasonIdentityReplayPeerShare,
	}
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

// register registers every collector, stopping at the first error.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// metrics are the collectors of sessions, frames and upgrades.
type metrics struct {
	sessionsActive  prometheus.Gauge
	sessions        *prometheus.CounterVec // result
	sessionDuration prometheus.Histogram
	rejects         *prometheus.CounterVec // reason
	relayDial       *prometheus.HistogramVec
	dropped         *prometheus.CounterVec // reason
	droppedUnknown  prometheus.Counter
	drainPending    prometheus.Gauge       // sessions a drain has yet to close
	full            prometheus.Gauge       // 1 past the --unready-at mark
	bounced         *prometheus.CounterVec // decided_by: new sessions bounced past the mark (bounce.go)
	recoveryMetrics
	// Binary messages by direction, resolved once.
	messagesToRelay, messagesToClient prometheus.Counter

	// Frame counters resolved once per type byte, so the hot path does no
	// label lookup. Indexed by the type byte; unknown bytes share "unknown".
	toRelay, toClient *[256]frameCounter
}

type frameCounter struct{ frames, bytes prometheus.Counter }

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns = metricsNamespace
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
		drainPending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "drain_pending_sessions",
			Help: "Sessions the drain in progress has yet to close (0 when not draining); paced by --drain-rate."}),
		full: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "full",
			Help: "1 while the sessions are past --unready-at percent of --max-sessions (fullready.go); /readyz is not affected."}),
		bounced: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "bounced_total",
			Help: "New sessions bounced past the full mark (upgrade, close 1013 replica_full), by who drew it: bridge or authz."},
			[]string{"decided_by"}),
	}
	messages := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "messages_total",
		Help: "Binary WebSocket messages by direction."}, []string{"direction"})
	frames := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "frames_total",
		Help: "Relay frames by direction and type."}, []string{"direction", "type"})
	bytes := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "bytes_total",
		Help: "Relay frame bytes (header included) by direction and type."}, []string{"direction", "type"})
	if err := register(reg, m.sessionsActive, m.sessions, m.sessionDuration, m.rejects,
		m.relayDial, m.dropped, m.drainPending, m.full, m.bounced, messages, frames, bytes); err != nil {
		return nil, err
	}
	if err := m.recoveryMetrics.init(reg); err != nil {
		return nil, err
	}
	for _, r := range bridgeDenyReasons() {
		m.rejects.WithLabelValues(string(r)) // export zeros for every reason the bridge answers
	}
	for _, r := range sessionEndReasons() {
		m.sessions.WithLabelValues(string(r))
	}
	for _, by := range []string{BounceByBridge, BounceByAuthz} {
		m.bounced.WithLabelValues(by)
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

// recoveryMetrics are the collectors of the relay hold, the per-peer
// limits, the probe mode and the key-mismatch backoff (part of metrics).
type recoveryMetrics struct {
	relayHeld         prometheus.Gauge
	holdDuration      *prometheus.HistogramVec // outcome
	probes            *prometheus.CounterVec   // result
	keyBackoffStrikes prometheus.Counter
}

func (m *recoveryMetrics) init(reg prometheus.Registerer) error {
	const ns = metricsNamespace
	m.relayHeld = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "relay_held_requests",
		Help: "Upgrades held unanswered while the relay is unreachable (--relay-wait)."})
	m.holdDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "relay_hold_duration_seconds",
		Help:    "Time upgrades were held waiting for the relay, by outcome.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8}}, []string{"outcome"})
	m.probes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "probe_sessions_total",
		Help: "Probe-mode sessions (subprotocol wirekube.relay.probe.v1) by result."}, []string{"result"})
	m.keyBackoffStrikes = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "key_mismatch_strikes_total",
		Help: "Register key mismatches that started or lengthened an identity's backoff window."})
	if err := register(reg, m.relayHeld, m.holdDuration, m.probes, m.keyBackoffStrikes); err != nil {
		return err
	}
	for _, o := range holdOutcomes {
		m.holdDuration.WithLabelValues(o)
	}
	return nil
}

func (m *recoveryMetrics) observeHold(d time.Duration, outcome string) {
	m.holdDuration.WithLabelValues(outcome).Observe(d.Seconds())
}

// Outcomes of one address attempt (wirekube_bridge_relay_dial_attempts_total)
// and of a name resolution (wirekube_bridge_relay_resolves_total).
const (
	dialOK       = "ok"
	dialRefused  = "refused"
	dialTimeout  = "timeout"
	dialCanceled = "canceled" // the caller gave up (client gone, shutdown)
	dialError    = "error"
	resolveStale = "error_used_previous" // lookup failed, last good answer reused
)

// dialMetrics count the relay dialer's steps (relaydial.go). The whole
// dial's latency stays in wirekube_bridge_relay_dial_duration_seconds.
type dialMetrics struct {
	attempts  *prometheus.CounterVec // result
	resolves  *prometheus.CounterVec // result
	addresses prometheus.Gauge
}

func newDialMetrics(reg prometheus.Registerer) (*dialMetrics, error) {
	const ns = metricsNamespace
	m := &dialMetrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "relay_dial_attempts_total",
			Help: "Connection attempts to one relay address by result (ok, refused, timeout, canceled, error)."},
			[]string{"result"}),
		resolves: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "relay_resolves_total",
			Help: "Resolutions of the --relay-addr host by result (ok, error, error_used_previous)."},
			[]string{"result"}),
		addresses: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "relay_addresses",
			Help: "Relay addresses in the last resolution of --relay-addr (relay Pods behind the headless Service)."}),
	}
	if err := register(reg, m.attempts, m.resolves, m.addresses); err != nil {
		return nil, err
	}
	for _, r := range []string{dialOK, dialRefused, dialTimeout, dialCanceled, dialError} {
		m.attempts.WithLabelValues(r) // export zeros: alerts can rate() them
	}
	for _, r := range []string{dialOK, dialError, resolveStale} {
		m.resolves.WithLabelValues(r)
	}
	return m, nil
}

func (m *dialMetrics) attempt(result string) { m.attempts.WithLabelValues(result).Inc() }

func (m *dialMetrics) resolved(result string, addrs int) {
	m.resolves.WithLabelValues(result).Inc()
	if result == dialOK {
		m.addresses.Set(float64(addrs))
	}
}
