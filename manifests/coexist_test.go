package manifests

import (
	"maps"
	"net"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/wirekube/relay-ws/internal/test/netpol"
)

// ChartShapes are the WireKube chart's shapes modelled in
// testdata/wirekube-chart (docs/alongside-chart.md).
var chartShapes = []string{"tcp", "wss", "mesh-unmanaged"}

func chartFixture(t *testing.T, shape string) *rendered {
	t.Helper()
	return renderDir(t, "testdata/wirekube-chart/"+shape)
}

// ours are the renderings of this project an operator installs next to
// the WireKube chart in a shape: the kustomize base and overlays and the
// chart in its value sets. The WireKubeMesh example belongs only next to a
// chart that does not create one (mesh.create: false).
func ours(t *testing.T, shape string) []*rendered {
	t.Helper()
	out := []*rendered{renderDir(t, "base"), renderDir(t, "examples/relay-lockdown"), renderDir(t, "examples/ingress-nginx"),
		renderDir(t, "examples/prometheus")}
	for _, name := range []string{"default", "front-none", "enforce", "monitoring"} {
		out = append(out, renderChart(t, chartValueSets[name]...))
	}
	if shape == "mesh-unmanaged" {
		out = append(out, renderDir(t, "examples/mesh-managed"))
	}
	return out
}

func objectKey(o *unstructured.Unstructured) string {
	return o.GroupVersionKind().GroupKind().String() + " " + o.GetNamespace() + "/" + o.GetName()
}

// checkNoNameCollision: none of our objects has the kind, namespace
// and name of an object of the WireKube chart in any shape (the guide
// replaces none of the chart's objects by name).
func checkNoNameCollision(t *testing.T, theirs *rendered, ourRs []*rendered) {
	keys := map[string]bool{}
	for _, o := range theirs.objs {
		keys[objectKey(o)] = true
	}
	for _, r := range ourRs {
		for _, o := range r.objs {
			mustf(t, !keys[objectKey(o)], "%s: %s is also an object of the WireKube chart", r.dir, objectKey(o))
		}
	}
}

// TestCoexist: our renderings next to each shape of the WireKube chart.
func TestCoexist(t *testing.T) {
	for _, shape := range chartShapes {
		theirs, ourRs := chartFixture(t, shape), ours(t, shape)
		for _, c := range []struct {
			name  string
			check func(*testing.T, *rendered, []*rendered)
		}{
			{"no_name_collision", checkNoNameCollision},
			{"selectors_do_not_cross", checkSelectorsDoNotCross},
			{"dialed_service_exists", checkDialedServiceExists},
			{"agent_token_already_mounted", func(t *testing.T, theirs *rendered, _ []*rendered) { checkAgentToken(t, theirs) }},
		} {
			t.Run(shape+"/"+c.name, func(t *testing.T) { c.check(t, theirs, ourRs) })
		}
	}
}

// TestCoexistMeshExampleCollidesWithChartMesh: the reason the guide says to
// apply our WireKubeMesh only with mesh.create: false.
func TestCoexistMeshExampleCollidesWithChartMesh(t *testing.T) {
	mesh := renderDir(t, "examples/mesh-managed").one(t, "WireKubeMesh", "")
	for _, shape := range []string{"tcp", "wss"} {
		found := slices.ContainsFunc(chartFixture(t, shape).objs, func(o *unstructured.Unstructured) bool {
			return objectKey(o) == objectKey(mesh)
		})
		mustf(t, found, "chart shape %s does not render WireKubeMesh %s: the guide's warning is stale", shape, mesh.GetName())
	}
}

// podTemplates returns the Pod template labels of every workload, by
// "namespace/name".
func podTemplates(t *testing.T, r *rendered) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, o := range r.objs {
		if l, ok, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels"); ok {
			out[o.GetNamespace()+"/"+o.GetName()] = l
		}
	}
	return out
}

// selectorsOf returns the Pod selectors of Services, PDBs, workloads,
// PodMonitors and NetworkPolicies, by "Kind namespace/name".
func selectorsOf(t *testing.T, r *rendered) map[string]labels.Selector {
	t.Helper()
	out := map[string]labels.Selector{}
	for _, o := range r.objs {
		var sel *metav1.LabelSelector
		switch o.GetKind() {
		case "Service":
			m, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector")
			if len(m) > 0 {
				sel = &metav1.LabelSelector{MatchLabels: m}
			}
		case "Deployment", "DaemonSet", "PodDisruptionBudget", "PodMonitor":
			m, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
			sel = &metav1.LabelSelector{MatchLabels: m}
		case "NetworkPolicy":
			m, _, _ := unstructured.NestedStringMap(o.Object, "spec", "podSelector", "matchLabels")
			sel = &metav1.LabelSelector{MatchLabels: m}
		}
		if sel == nil {
			continue
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		out[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = s
	}
	return out
}

// checkSelectorsDoNotCross: our Services, PDBs and monitors select
// none of the chart's Pods and the chart's select none of ours. The one
// intended crossing is our NetworkPolicy on the relay Pods.
func checkSelectorsDoNotCross(t *testing.T, theirs *rendered, ourRs []*rendered) {
	intended := "NetworkPolicy wirekube-system/wirekube-relay-gateway-relay-ports"
	theirPods, theirSel := podTemplates(t, theirs), selectorsOf(t, theirs)
	for _, r := range ourRs {
		for name, sel := range selectorsOf(t, r) {
			for pod, l := range theirPods {
				mustf(t, name == intended || !sel.Matches(labels.Set(l)), "%s: our %s selects the chart's Pods %s", r.dir, name, pod)
			}
		}
		for pod, l := range podTemplates(t, r) {
			for name, sel := range theirSel {
				mustf(t, !sel.Matches(labels.Set(l)), "%s: the chart's %s selects our Pods %s", r.dir, name, pod)
			}
		}
	}
}

// relayAddrs returns every bridge --relay-addr of a rendering.
func relayAddrs(t *testing.T, r *rendered) []string {
	t.Helper()
	var out []string
	for _, u := range r.all("Deployment") {
		d := into[appsv1.Deployment](t, u)
		if c := container(d, "bridge"); c != nil {
			v, ok := flagValue(c.Args, "relay-addr")
			mustf(t, ok, "%s: bridge without --relay-addr", r.dir)
			out = append(out, v)
		}
	}
	mustf(t, len(out) > 0, "%s: no bridge", r.dir)
	return out
}

// checkDialedServiceExists: in every chart shape, the Service the
// bridge dials exists, serves the port on TCP and selects the relay Pods,
// whose container has that port.
func checkDialedServiceExists(t *testing.T, theirs *rendered, ourRs []*rendered) {
	relay := into[appsv1.Deployment](t, theirs.one(t, "Deployment", "wirekube-relay"))
	for _, r := range ourRs {
		if len(r.all("Deployment")) == 0 {
			continue
		}
		for _, addr := range relayAddrs(t, r) {
			checkDialed(t, theirs, relay, r.dir, addr)
		}
	}
}

func checkDialed(t *testing.T, theirs *rendered, relay *appsv1.Deployment, dir, addr string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: --relay-addr %q: %v", dir, addr, err)
	}
	name, ns, ok := strings.Cut(strings.TrimSuffix(host, ".svc.cluster.local"), ".")
	if !ok || strings.Contains(ns, ".") {
		t.Fatalf("%s: --relay-addr host %q is not <service>.<namespace>.svc.cluster.local", dir, host)
	}
	var svc *corev1.Service
	for _, u := range theirs.all("Service") {
		if u.GetName() == name && u.GetNamespace() == ns {
			svc = into[corev1.Service](t, u)
		}
	}
	if svc == nil {
		t.Errorf("%s dials %s, but the chart shape %s has no Service %s/%s", dir, addr, theirs.dir, ns, name)
		return
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	mustf(t, len(svc.Spec.Selector) > 0 && sel.Matches(labels.Set(relay.Spec.Template.Labels)),
		"%s: Service %s does not select the relay Pods", theirs.dir, name)
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
		return p.Protocol == corev1.ProtocolTCP && p.Port == mustAtoi(t, port)
	})
	if i < 0 {
		t.Errorf("%s: Service %s has no TCP port %s", theirs.dir, name, port)
		return
	}
	// Headless: the port reaches the Pod's targetPort directly.
	target := svc.Spec.Ports[i].TargetPort
	found := slices.ContainsFunc(relay.Spec.Template.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool {
		return p.Protocol == corev1.ProtocolTCP && (p.Name == target.StrVal || p.ContainerPort == target.IntVal)
	})
	mustf(t, found, "%s: Service %s targets %s, which the relay container does not serve on TCP", theirs.dir, name, target.String())
}

func mustAtoi(t *testing.T, s string) int32 {
	t.Helper()
	var n int32
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("port %q", s)
		}
		n = n*10 + int32(c-'0')
	}
	return n
}

// TestCoexistFlowModelMatchesChart: the Pods of the flow table
// (internal/test/netpol) carry the labels, namespace and network of the chart
// fixtures' Pods, so the table's verdicts are about the chart as modelled.
func TestCoexistFlowModelMatchesChart(t *testing.T) {
	wss := chartFixture(t, "wss")
	for _, tc := range []struct {
		model    netpol.Endpoint
		workload string
		hostNet  bool
	}{
		{netpol.RelayPod, "Deployment/wirekube-relay", false},
		{netpol.RelayPod2, "Deployment/wirekube-relay", false},
		{netpol.ChartGatewayPod, "Deployment/wirekube-relay-ws", false},
		{netpol.AgentHostNetwork, "DaemonSet/wirekube-agent", true},
	} {
		kind, name, _ := strings.Cut(tc.workload, "/")
		u := wss.one(t, kind, name)
		l, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
		hn, _, _ := unstructured.NestedBool(u.Object, "spec", "template", "spec", "hostNetwork")
		mustf(t, maps.Equal(l, tc.model.Labels), "%s: fixture labels %v, modelled %v", tc.model.Name, l, tc.model.Labels)
		mustf(t, u.GetNamespace() == tc.model.Namespace && hn == tc.model.HostNetwork && hn == tc.hostNet,
			"%s: namespace %q hostNetwork %v, modelled %q %v", tc.model.Name, u.GetNamespace(), hn, tc.model.Namespace, tc.model.HostNetwork)
	}
}
