package manifests

import (
	"os"
	"testing"

	"github.com/wirekube/relay-ws/internal/test/promql"
)

// TestDashboardShowsFullMarkAndDrain: some panel of the dashboard reads the
// bridge's full mark, the sessions a pending drain has yet to close, and
// Envoy's overload action and its clusters' connect failures and resets.
func TestDashboardShowsFullMarkAndDrain(t *testing.T) {
	dash, err := os.ReadFile("../charts/wirekube-relay-ws/files/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	exprs, err := promql.DashboardExpressions(dash)
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	for _, e := range exprs {
		names, err := promql.MetricNames(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			read[n] = true
		}
	}
	for _, want := range []string{"wirekube_bridge_full", "wirekube_bridge_drain_pending_sessions",
		"envoy_overload_envoy_overload_actions_stop_accepting_requests_active",
		"envoy_cluster_upstream_cx_connect_fail", "envoy_cluster_upstream_rq_rx_reset"} {
		mustf(t, read[want], "no dashboard panel reads %s", want)
	}
}
