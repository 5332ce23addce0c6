package manifests

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wirekube/relay-ws/internal/test/render"
)

// TestChartServiceAndMonitorKnobs: the Service options an operator sets for
// a cloud load balancer or a dual-stack cluster, the monitors' scrape
// timeout and relabelings on every endpoint, alerts left out or added, and
// objects of the operator's own, and the update strategy all reach the
// rendered objects.
func TestChartServiceAndMonitorKnobs(t *testing.T) {
	r := renderChart(t, "--set", "service.type=LoadBalancer,service.nodePort=30443,service.loadBalancerClass=service.k8s.aws/nlb,"+
		"service.ipFamilyPolicy=PreferDualStack,service.ipFamilies[0]=IPv6,service.ipFamilies[1]=IPv4,"+
		"monitoring.podMonitor.enabled=true,monitoring.podMonitor.scrapeTimeout=10s,"+
		"monitoring.podMonitor.relabelings[0].action=labeldrop,monitoring.podMonitor.relabelings[0].regex=pod_template_hash,"+
		"monitoring.serviceMonitor.enabled=true,monitoring.serviceMonitor.metricRelabelings[0].action=drop,"+
		"monitoring.serviceMonitor.metricRelabelings[0].sourceLabels[0]=__name__,monitoring.serviceMonitor.metricRelabelings[0].regex=go_.*,"+
		"monitoring.prometheusRule.enabled=true,monitoring.prometheusRule.disabledAlerts[0]=WireKubeRelayGatewayDown,"+
		"monitoring.prometheusRule.extraRules[0].alert=MyGatewayAlert,monitoring.prometheusRule.extraRules[0].expr=vector(1)",
		"--set-json", `extraObjects=[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"map-object"}},"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-{{ .Release.Name }}"]`)
	svc := into[corev1.Service](t, r.one(t, "Service", "wirekube-relay-gateway"))
	mustf(t, svc.Spec.LoadBalancerClass != nil && *svc.Spec.LoadBalancerClass == "service.k8s.aws/nlb", "loadBalancerClass %v", svc.Spec.LoadBalancerClass)
	mustf(t, svc.Spec.IPFamilyPolicy != nil && *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicyPreferDualStack, "ipFamilyPolicy %v", svc.Spec.IPFamilyPolicy)
	mustf(t, slices.Equal(svc.Spec.IPFamilies, []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}), "ipFamilies %v", svc.Spec.IPFamilies)
	mustf(t, len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].NodePort == 30443, "ports %+v, want nodePort 30443", svc.Spec.Ports)

	for kind, field := range map[string]string{"PodMonitor": "podMetricsEndpoints", "ServiceMonitor": "endpoints"} {
		eps, _, _ := unstructured.NestedSlice(r.one(t, kind, "wirekube-relay-gateway").Object, "spec", field)
		mustf(t, len(eps) == 3, "%s has %d endpoints, want 3", kind, len(eps))
		for _, e := range eps {
			ep := e.(map[string]any)
			switch kind {
			case "PodMonitor":
				relabel, _ := ep["relabelings"].([]any)
				mustf(t, ep["scrapeTimeout"] == "10s" && len(relabel) == 1, "PodMonitor endpoint %v, want scrapeTimeout 10s and one relabeling", ep)
			case "ServiceMonitor":
				metric, _ := ep["metricRelabelings"].([]any)
				mustf(t, len(metric) == 1 && ep["scrapeTimeout"] == nil, "ServiceMonitor endpoint %v, want one metricRelabeling and no timeout", ep)
			}
		}
	}

	groups, _, _ := unstructured.NestedSlice(r.one(t, "PrometheusRule", "wirekube-relay-gateway").Object, "spec", "groups")
	var alerts []string
	for _, g := range groups {
		for _, rule := range g.(map[string]any)["rules"].([]any) {
			alerts = append(alerts, rule.(map[string]any)["alert"].(string))
		}
	}
	mustf(t, !slices.Contains(alerts, "WireKubeRelayGatewayDown"), "the disabled alert is rendered")
	mustf(t, slices.Contains(alerts, "MyGatewayAlert") && slices.Contains(alerts, "WireKubeRelayGatewayTargetDown"),
		"alerts %v, want the extra one beside the shipped ones", alerts)

	r.one(t, "ConfigMap", "map-object")
	r.one(t, "ConfigMap", "from-wirekube-relay-gateway")

	d := renderChart(t, "--set", "updateStrategy.rollingUpdate.maxSurge=2,updateStrategy.rollingUpdate.maxUnavailable=1").deployment(t)
	ru := d.Spec.Strategy.RollingUpdate
	mustf(t, d.Spec.Strategy.Type == "RollingUpdate" && ru != nil && ru.MaxSurge.IntValue() == 2 && ru.MaxUnavailable.IntValue() == 1,
		"strategy %+v, want maxSurge 2, maxUnavailable 1", d.Spec.Strategy)
}

// TestChartPeerAdmissionStage: peerAdmission.validationActions reaches the
// binding, Deny by default and [Warn, Audit] for a trial stage, and the
// schema refuses an action Kubernetes does not have.
func TestChartPeerAdmissionStage(t *testing.T) {
	actions := func(r *rendered) []any {
		v, _, _ := unstructured.NestedSlice(r.one(t, "ValidatingAdmissionPolicyBinding", "wirekube-relay-gateway-peer-keys").Object, "spec", "validationActions")
		return v
	}
	mustf(t, slices.Equal(actions(renderChart(t)), []any{"Deny"}), "default actions %v, want [Deny]", actions(renderChart(t)))
	trial := actions(renderChart(t, "--set", "peerAdmission.validationActions={Warn,Audit}"))
	mustf(t, slices.Equal(trial, []any{"Warn", "Audit"}), "trial actions %v, want [Warn Audit]", trial)
	_, err := render.HelmTemplate(t.Context(), chartDir, namespace, "--set", "peerAdmission.validationActions={Log}")
	mustf(t, err != nil && strings.Contains(err.Error(), "validationActions"), "an unknown action: %v", err)
}
