package jwks

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
)

// metrics are the key set's collectors.
type metrics struct {
	jwksRefreshes *prometheus.CounterVec
	jwksKeys      prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns = contract.MetricsNamespaceExtauthz
	m := &metrics{
		jwksRefreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "jwks_refreshes_total",
			Help: "Fetches of the ServiceAccount signing keys by trigger (periodic|unknown_kid) and result (ok|error).",
		}, []string{"trigger", "result"}),
		jwksKeys: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Name: "jwks_keys", Help: "ServiceAccount token verification keys loaded.",
		}),
	}
	for _, c := range []prometheus.Collector{m.jwksRefreshes, m.jwksKeys} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
