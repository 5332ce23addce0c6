package manifests

import (
	"github.com/wirekube/relay-ws/internal/test/render"
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/wirekube/relay-ws/internal/test/netpol"
)

// policies returns every NetworkPolicy of the rendering.
func (r *rendered) policies(t *testing.T) []networkingv1.NetworkPolicy {
	t.Helper()
	var out []networkingv1.NetworkPolicy
	for _, u := range r.all("NetworkPolicy") {
		out = append(out, *into[networkingv1.NetworkPolicy](t, u))
	}
	return out
}

// checkFlows holds the rendered policies to the gateway's flow table
// (internal/test/netpol.GatewayFlows) for shape s.
func checkFlows(t *testing.T, r *rendered, s netpol.Shape) {
	t.Helper()
	pols := r.policies(t)
	mustf(t, len(pols) > 0 || (s.RelayOpen && !s.WithoutEnvoy), "%s renders no NetworkPolicy", r.dir)
	for _, v := range netpol.Violations(pols, netpol.GatewayFlows(s)) {
		t.Errorf("%s: %s", r.dir, v)
	}
}

// checkRelayPolicy: the base holds the flow table, and the table's model of
// the gateway Pod is the rendered one (same labels, same namespace).
func checkRelayPolicy(t *testing.T, r *rendered, d *appsv1.Deployment) {
	mustf(t, maps.Equal(d.Spec.Template.Labels, netpol.GatewayPod.Labels),
		"gateway Pod labels %v, the flow table models %v", d.Spec.Template.Labels, netpol.GatewayPod.Labels)
	mustf(t, d.Namespace == netpol.GatewayPod.Namespace, "gateway namespace %q, modelled %q", d.Namespace, netpol.GatewayPod.Namespace)
	checkFlows(t, r, netpol.Shape{RelayOpen: true})
}

// TestRelayLockdownStages: the kustomize stages of the relay lock-down. The
// base must not cut agents on transport tcp (hostNetwork, node addresses):
// the lock-down is a component added on purpose.
func TestRelayLockdownStages(t *testing.T) {
	for dir, s := range map[string]netpol.Shape{
		"base":                    {RelayOpen: true},
		"examples/relay-lockdown": {},
	} {
		t.Run(dir, func(t *testing.T) { checkFlows(t, renderDir(t, dir), s) })
	}
}

// TestNetworkPolicyFlowsWithoutEnvoy: the shapes whose proxy runs ext_authz
// itself keep the relay table and add the bridge's own policy.
func TestNetworkPolicyFlowsWithoutEnvoy(t *testing.T) {
	for _, dir := range []string{"examples/ingress-nginx", "examples/envoy-gateway", "examples/istio"} {
		t.Run(dir, func(t *testing.T) {
			checkFlows(t, renderDir(t, dir), netpol.Shape{WithoutEnvoy: true, RelayOpen: true})
		})
	}
}

// TestEveryNamespacedObjectHasANamespace: an object without one lands in
// whatever namespace `kubectl apply` defaults to, where a NetworkPolicy
// selects nothing (components do not get the base's namespace: this once
// left the without-envoy bridge open to every Pod).
func TestEveryNamespacedObjectHasANamespace(t *testing.T) {
	clusterScoped := map[string]bool{"ClusterRole": true, "ClusterRoleBinding": true, "WireKubeMesh": true,
		"WireKubePeer": true, "CustomResourceDefinition": true, "Namespace": true,
		"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}
	for _, dir := range render.Dirs() {
		r := renderDir(t, dir)
		for _, o := range r.objs {
			mustf(t, clusterScoped[o.GetKind()] || o.GetNamespace() != "", "%s: %s %s has no namespace", dir, o.GetKind(), o.GetName())
		}
	}
}

// TestChartGatewayPolicyForEnvoy: networkPolicy.gateway.enabled keeps every
// flow of the table (agents to Envoy, Prometheus to the metrics ports) and
// closes the metrics ports to any other Pod when metricsFrom names
// Prometheus's namespace, and the Pod's other ports to everyone.
func TestChartGatewayPolicyForEnvoy(t *testing.T) {
	r := renderChart(t, "--set", "networkPolicy.gateway.enabled=true,networkPolicy.gateway.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring")
	checkFlows(t, r, netpol.Shape{RelayOpen: true})
	pols := r.policies(t)
	for _, c := range []netpol.Case{
		{Flow: netpol.Flow{From: netpol.OtherPod, To: netpol.GatewayPod, Protocol: "TCP", Port: 9902}, Allow: false, Why: "Envoy metrics only from metricsFrom"},
		{Flow: netpol.Flow{From: netpol.OtherPod, To: netpol.GatewayPod, Protocol: "TCP", Port: 9103}, Allow: false, Why: "extauthz metrics only from metricsFrom"},
		{Flow: netpol.Flow{From: netpol.Internet, To: netpol.GatewayPod, Protocol: "TCP", Port: 9901}, Allow: false, Why: "no other port of the Pod"},
		{Flow: netpol.Flow{From: netpol.OtherPod, To: netpol.GatewayPod, Protocol: "TCP", Port: 8081}, Allow: false, Why: "no other port of the Pod"},
	} {
		for _, v := range netpol.Violations(pols, []netpol.Case{c}) {
			t.Error(v)
		}
	}
	mustf(t, len(renderChart(t).policies(t)) == 0, "the default renders a NetworkPolicy")
}
