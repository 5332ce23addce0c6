package manifests

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wirekube/relay-ws/bridge"
	"github.com/wirekube/relay-ws/internal/test/promql"
)

// ownMetricsPath is the path each container serves its own families on.
var ownMetricsPath = map[string]string{"bridge": "/metrics", "extauthz": "/metrics", "envoy": "/stats/prometheus"}

// TestEveryAlertCanFireInEveryScrapingMode: for each way the chart offers to
// scrape the gateway (the prometheus.io annotations alone, the PodMonitor,
// the ServiceMonitor; with and without Envoy), every metric an expression of
// the rendered PrometheusRule reads is served on a port and path that mode
// scrapes. The families each container serves come from the code (the
// bridge's and extauthz's prometheus Opts literals; Envoy's names from its
// documentation), the scraped ports and paths from the rendered objects.
func TestEveryAlertCanFireInEveryScrapingMode(t *testing.T) {
	families := map[string]map[string]bool{
		"bridge":   codeMetricNames(t, "../bridge"),
		"extauthz": codeMetricNames(t, "../extauthz"),
		"envoy":    map[string]bool{},
	}
	for _, n := range promql.EnvoyNames {
		families["envoy"][n] = true
	}
	mustf(t, families["bridge"]["wirekube_bridge_sessions_active"] && families["extauthz"]["wirekube_extauthz_checks_total"],
		"the code readers found no known family: %d bridge, %d extauthz", len(families["bridge"]), len(families["extauthz"]))
	modes := map[string]string{
		"annotations":    "monitoring.annotations=true",
		"podMonitor":     "monitoring.annotations=false,monitoring.podMonitor.enabled=true",
		"serviceMonitor": "monitoring.annotations=false,monitoring.serviceMonitor.enabled=true",
	}
	for mode, set := range modes {
		for _, front := range []string{"envoy", "none"} {
			t.Run(mode+"/front="+front, func(t *testing.T) {
				args := []string{"--set", set + ",monitoring.prometheusRule.enabled=true,front=" + front}
				if front == "none" {
					args = append(args, "--set", signingSecretSet)
				}
				r := renderChart(t, args...)
				served := map[string]bool{"up": true} // Prometheus's own
				for _, s := range scrapedEndpoints(t, r) {
					for name := range servedOn(t, r, s, families) {
						served[name] = true
					}
				}
				rules := r.one(t, "PrometheusRule", "wirekube-relay-gateway")
				exprs := ruleExprs(t, rules)
				mustf(t, len(exprs) >= 20, "only %d rules rendered", len(exprs))
				for alert, expr := range exprs {
					names, err := promql.MetricNames(expr)
					if err != nil {
						t.Fatal(err)
					}
					for _, n := range names {
						mustf(t, served[n], "%s reads %s, which no endpoint this mode scrapes serves", alert, n)
					}
				}
			})
		}
	}
}

// endpoint is a scraped container port and path.
type endpoint struct{ container, path string }

// scrapedEndpoints returns what the rendered chart makes Prometheus scrape:
// the Pod annotations' port and path, each PodMonitor endpoint, and each
// ServiceMonitor endpoint through the metrics Service's targetPort.
func scrapedEndpoints(t *testing.T, r *rendered) []endpoint {
	t.Helper()
	pod := r.deployment(t).Spec.Template
	var out []endpoint
	if a := pod.Annotations; a["prometheus.io/scrape"] == "true" {
		port, err := strconv.Atoi(a["prometheus.io/port"])
		mustf(t, err == nil, "prometheus.io/port %q", a["prometheus.io/port"])
		out = append(out, endpoint{containerWith(pod.Spec.Containers, func(p corev1.ContainerPort) bool { return int(p.ContainerPort) == port }), a["prometheus.io/path"]})
	}
	for _, pm := range r.all("PodMonitor") {
		eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
		for _, e := range eps {
			m := e.(map[string]any)
			name, path := m["port"].(string), m["path"].(string)
			out = append(out, endpoint{containerWith(pod.Spec.Containers, func(p corev1.ContainerPort) bool { return p.Name == name }), path})
		}
	}
	for _, sm := range r.all("ServiceMonitor") {
		targets := map[string]string{}
		svc := r.one(t, "Service", "wirekube-relay-gateway-metrics")
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		for _, p := range ports {
			m := p.(map[string]any)
			targets[m["name"].(string)] = m["targetPort"].(string)
		}
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		for _, e := range eps {
			m := e.(map[string]any)
			target, path := targets[m["port"].(string)], m["path"].(string)
			out = append(out, endpoint{containerWith(pod.Spec.Containers, func(p corev1.ContainerPort) bool { return p.Name == target }), path})
		}
	}
	mustf(t, len(out) > 0, "%s: nothing is scraped", r.dir)
	return out
}

// containerWith names the container with a port matching match ("" if none).
func containerWith(cs []corev1.Container, match func(corev1.ContainerPort) bool) string {
	for _, c := range cs {
		if slices.ContainsFunc(c.Ports, match) {
			return c.Name
		}
	}
	return ""
}

// servedOn returns the families an endpoint serves: the container's own on
// its own path; on the bridge's re-export path also those of each
// --reexport-metrics URL's container (the one whose port it names, on that
// container's own path).
func servedOn(t *testing.T, r *rendered, e endpoint, families map[string]map[string]bool) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if e.path == ownMetricsPath[e.container] {
		return families[e.container]
	}
	if e.container != "bridge" || e.path != bridge.ReexportPath {
		return out
	}
	pod := r.deployment(t).Spec.Template
	maps := []map[string]bool{families["bridge"]}
	for _, u := range parseBridge(t, container(r.deployment(t), "bridge").Args).ReexportMetrics {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(pu.Port())
		c := containerWith(pod.Spec.Containers, func(p corev1.ContainerPort) bool { return int(p.ContainerPort) == port })
		if c != "" && pu.Path == ownMetricsPath[c] {
			maps = append(maps, families[c])
		}
	}
	for _, m := range maps {
		for n := range m {
			out[n] = true
		}
	}
	return out
}

// ruleExprs returns each rendered rule's expression by alert name.
func ruleExprs(t *testing.T, rule *unstructured.Unstructured) map[string]string {
	t.Helper()
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	out := map[string]string{}
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			m := r.(map[string]any)
			name, _ := m["alert"].(string)
			if name == "" {
				name, _ = m["record"].(string)
			}
			out[name] = strings.TrimSpace(m["expr"].(string))
		}
	}
	return out
}
