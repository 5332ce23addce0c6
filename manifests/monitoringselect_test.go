package manifests

import (
	"os"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/wirekube/relay-ws/internal/test/promql"
)

// jobMatcher is a PromQL label matcher on job.
var jobMatcher = regexp.MustCompile(`\bjob\s*(=|!=|=~|!~)`)

// TestMonitoringSelectsTargetsByPod: no alert and no dashboard panel finds
// the gateway by its job label, which each scraping mode names its own way
// (the PodMonitor namespace/name, the ServiceMonitor's Service, the
// annotation scraper's own job): they select the Pods by name, as every mode
// labels them.
func TestMonitoringSelectsTargetsByPod(t *testing.T) {
	dash, err := os.ReadFile("../charts/wirekube-relay-ws/files/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	panels, err := promql.DashboardExpressions(dash)
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, e := range panels {
		exprs = append(exprs, e)
	}
	raw, err := os.ReadFile("../charts/wirekube-relay-ws/files/prometheusrule-spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	if len(exprs) < 20 {
		t.Fatalf("found only %d expressions: the readers are broken", len(exprs))
	}
	for _, e := range exprs {
		if jobMatcher.MatchString(e) {
			t.Errorf("%q selects by job, which depends on the scraping mode: select the Pods by name", e)
		}
	}
}
