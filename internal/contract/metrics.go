package contract

// The prefixes of every metric the two binaries export: alerts, dashboards
// and the chart's ServiceMonitor read the families by these names
// (docs/monitoring.md), so each room of a binary registers under its
// binary's prefix from here.
const (
	// MetricsNamespaceBridge prefixes wirekube-bridge's metrics.
	MetricsNamespaceBridge = "wirekube_bridge"
	// MetricsNamespaceExtauthz prefixes wirekube-extauthz's metrics.
	MetricsNamespaceExtauthz = "wirekube_extauthz"
)
