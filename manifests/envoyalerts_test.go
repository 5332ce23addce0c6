package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/wirekube/relay-ws/internal/test/promql"
)

// TestAlertsOnEnvoyOverloadAndResets: some alert reads Envoy's overload
// action stop_accepting_requests (an action envoy/envoy.yaml configures) and
// its global connection limit, and connect failures and resets of each
// cluster envoy/envoy.yaml forwards relay traffic and checks to (bridge,
// extauthz).
func TestAlertsOnEnvoyOverloadAndResets(t *testing.T) {
	raw, err := os.ReadFile("../envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		OverloadManager struct {
			Actions []struct{ Name string } `json:"actions"`
		} `json:"overload_manager"`
		StaticResources struct {
			Clusters []struct{ Name string } `json:"clusters"`
		} `json:"static_resources"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	actions, clusters := map[string]bool{}, map[string]bool{}
	for _, a := range cfg.OverloadManager.Actions {
		actions[a.Name] = true
	}
	for _, c := range cfg.StaticResources.Clusters {
		clusters[c.Name] = true
	}
	mustf(t, actions["envoy.overload_actions.stop_accepting_requests"], "envoy.yaml has no stop_accepting_requests action: %v", actions)
	mustf(t, clusters["bridge"] && clusters["extauthz"], "envoy.yaml clusters %v", clusters)

	rules, err := os.ReadFile(filepath.Join(chartDir, "files", "prometheusrule-spec.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	exprs, err := promql.RuleExpressions(rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ metric, matcher string }{
		{"envoy_overload_envoy_overload_actions_stop_accepting_requests_active", ""},
		{"envoy_listener_downstream_global_cx_overflow", ""},
		{"envoy_cluster_upstream_cx_connect_fail", `envoy_cluster_name=~"bridge|extauthz"`},
		{"envoy_cluster_upstream_rq_rx_reset", `envoy_cluster_name=~"bridge|extauthz"`},
	} {
		found := false
		for _, e := range exprs {
			names, err := promql.MetricNames(e)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				found = found || n == want.metric && (want.matcher == "" || strings.Contains(e, want.metric+"{"+want.matcher))
			}
		}
		mustf(t, found, "no alert reads %s{%s}", want.metric, want.matcher)
	}
}
