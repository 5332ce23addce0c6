package promql

// EnvoyNames are the Prometheus names of the Envoy stats the gateway's
// alerts and dashboard read. No Envoy binary runs in the tests, so they are
// spelled from Envoy's statistics documentation (cluster, listener,
// overload manager and local rate limit stats) after its Prometheus
// rendering: the envoy_ prefix, dots as underscores, and the tags its
// default tag extraction takes out of the name (cluster name, listener
// address, local rate limit prefix) as labels. docs/monitoring.md names the
// stat behind each.
var EnvoyNames = []string{
	"envoy_http_local_rate_limit_rate_limited",
	"envoy_overload_envoy_overload_actions_stop_accepting_requests_active",
	"envoy_listener_downstream_global_cx_overflow",
	"envoy_cluster_upstream_cx_connect_fail",
	"envoy_cluster_upstream_rq_rx_reset",
}
