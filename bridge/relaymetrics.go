package bridge

import "github.com/prometheus/client_golang/prometheus"

// dialMetrics count the relay dialer's steps (relaydial.go). The whole
// dial's latency stays in wirekube_bridge_relay_dial_duration_seconds.
type dialMetrics struct {
	attempts  *prometheus.CounterVec // result
	resolves  *prometheus.CounterVec // result
	addresses prometheus.Gauge
}

func newDialMetrics(reg prometheus.Registerer) (*dialMetrics, error) {
	const ns = "wirekube_bridge"
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
	for _, c := range []prometheus.Collector{m.attempts, m.resolves, m.addresses} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
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
