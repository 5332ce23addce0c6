package bridge

import "github.com/prometheus/client_golang/prometheus"

// registerLimits exports the configured limits, so that alerts and
// dashboards can compare usage with them (sessions_active / sessions_limit)
// without knowing the flags.
func registerLimits(reg prometheus.Registerer, cfg *Config) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "wirekube_bridge", Name: "sessions_limit",
		Help: "The --max-sessions cap: beyond it upgrades get 503 at_capacity."})
	g.Set(float64(cfg.MaxSessions))
	return reg.Register(g)
}
