//go:build e2e

package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/wirekube/relay-ws/internal/test/promql"
	"github.com/wirekube/relay-ws/internal/test/render"
	"github.com/wirekube/relay-ws/internal/test/stack"
)

// signingSecretSet names the identity signing Secret a front=none render
// needs without a cluster (helm template never keeps a generated key).
const signingSecretSet = "identitySigning.existingSecret=wirekube-relay-gateway-identity-signing"

// chartValueSets are the chart shapes dry-run against the API server (the
// unit tests lint and compare the same shapes).
var chartValueSets = map[string][]string{
	"default":            nil,
	"front-none":         {"--set", "front=none," + signingSecretSet},
	"front-none-enforce": {"--set", "front=none,networkPolicy.mode=enforce," + signingSecretSet},
	"enforce":            {"--set", "networkPolicy.mode=enforce"},
	"monitoring": {"--set", "monitoring.podMonitor.enabled=true,monitoring.serviceMonitor.enabled=true," +
		"monitoring.prometheusRule.enabled=true,monitoring.grafanaDashboard.enabled=true"},
	"plaintext":      {"--set", "envoy.config=envoy-plaintext.yaml"},
	"single-replica": {"--set", "replicas=1"},
	"large": {"--set", "bridge.maxSessions=40000,envoy.resources.limits.memory=1Gi," +
		"bridge.resources.limits.memory=768Mi,extauthz.resources.limits.memory=640Mi,replicas=3"},
	"ingress-nginx": {"--set", "publicHost=relay.corp.internal,front=none,ingress.enabled=true,ingress.controller=ingress-nginx," + signingSecretSet},
	"operator-options": {"--set", "commonLabels.team=net,extraVolumes[0].name=ca,extraVolumes[0].configMap.name=ca," +
		"bridge.extraVolumeMounts[0].name=ca,bridge.extraVolumeMounts[0].mountPath=/etc/ca,bridge.extraEnv[0].name=E," +
		"bridge.extraEnv[0].value=v,bridge.debugSessions=true"},
	"revocation-off": {"--set", "bridge.revocationAddr="},
	"pod-options": {"--set", "imagePullSecrets[0].name=regcred,nodeSelector.pool=edge,podAnnotations.team=net," +
		"podLabels.tier=edge,service.type=LoadBalancer,service.externalTrafficPolicy=Local,image.digest=sha256:" +
		strings.Repeat("ab", 32)},
	"helm-test": {"--set", "helmTest.peer=node-a,helmTest.publicKey=q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80="},
}

func (e *env) renderChart(t *testing.T, namespace string, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := render.HelmTemplate(context.Background(), filepath.Join(e.repo, render.ChartPath), namespace, extra...)
	fatalIf(t, err)
	objs, err := stack.DecodeObjects(out)
	fatalIf(t, err)
	if len(objs) == 0 {
		t.Fatal("the chart renders no objects")
	}
	return objs
}

// testChartDryRun: the rendered chart, in each value set, passes a
// server-side dry-run apply against the real API server.
func (e *env) testChartDryRun(t *testing.T) {
	ctx := context.Background()
	for name, extra := range chartValueSets {
		if name == "helm-test" {
			continue // its Pod needs the agent ServiceAccount in its namespace: testAlongsideChart creates one and applies it
		}
		t.Run(name, func(t *testing.T) {
			objs := e.renderChart(t, stack.Namespace, extra...)
			fatalIf(t, e.cluster.Apply(ctx, objs, true))
		})
	}
}

// testAlongsideChart: each shape of the WireKube chart (the fixtures in
// manifests/testdata/wirekube-chart) is really applied into a namespace of
// its own; then none of our objects exists there yet (no name collides),
// the Service the bridge dials exists as a headless TCP 3478 Service, and
// our chart passes a server-side dry run next to it.
func (e *env) testAlongsideChart(t *testing.T) {
	for _, shape := range []string{"tcp", "wss", "mesh-unmanaged"} {
		t.Run(shape, func(t *testing.T) { e.alongsideShape(t, shape) })
	}
}

func (e *env) alongsideShape(t *testing.T, shape string) {
	ctx := context.Background()
	ns := "wk-chart-" + shape
	fatalIf(t, e.cluster.EnsureNamespace(ctx, ns))
	t.Cleanup(func() {
		_ = e.cluster.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	theirs, err := stack.RenderKustomize(ctx, filepath.Join(e.repo, "manifests", "testdata", "wirekube-chart", shape))
	fatalIf(t, err)
	var namespaced []*unstructured.Unstructured
	for _, o := range theirs {
		if o.GetNamespace() == "" {
			continue // the WireKubeMesh is cluster-scoped; the unit tests cover its name
		}
		o = o.DeepCopy()
		o.SetNamespace(ns)
		namespaced = append(namespaced, o)
	}
	fatalIf(t, e.cluster.Apply(ctx, namespaced, false))

	ours := e.renderChart(t, ns, "--set", "networkPolicy.relayNamespace="+ns,
		"--set", "bridge.relayAddr=wirekube-relay-control."+ns+".svc.cluster.local:3478")
	// The helm test Pod runs as the agent's ServiceAccount (the first of extauthz.agentServiceAccounts).
	agentSA := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{"name": "wirekube-agent", "namespace": ns}}}
	fatalIf(t, e.cluster.Apply(ctx, []*unstructured.Unstructured{agentSA}, false))
	for name, extra := range chartValueSets {
		if name == "default" {
			continue
		}
		more := e.renderChart(t, ns, append([]string{"--set", "networkPolicy.relayNamespace=" + ns,
			"--set", "extauthz.peerNamespace=" + ns, "--set", "extauthz.agentServiceAccounts={" + ns + "/wirekube-agent}"}, extra...)...)
		t.Run(name, func(t *testing.T) { fatalIf(t, e.cluster.Apply(ctx, namespacedOnly(more), true)) })
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.cluster.Client.Discovery()))
	for _, o := range ours {
		if o.GetNamespace() == "" {
			continue // cluster-scoped RBAC: one per cluster, never the chart's names (unit tests)
		}
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		fatalIf(t, err)
		_, err = e.cluster.Dynamic.Resource(m.Resource).Namespace(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s %s/%s: %v before our install, want NotFound (a name collides with the WireKube chart)", gvk.Kind, ns, o.GetName(), err)
		}
	}
	svc, err := e.cluster.Client.CoreV1().Services(ns).Get(ctx, "wirekube-relay-control", metav1.GetOptions{})
	fatalIf(t, err)
	if svc.Spec.ClusterIP != "None" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 3478 {
		t.Errorf("the dialed Service: clusterIP %q ports %+v, want headless TCP 3478", svc.Spec.ClusterIP, svc.Spec.Ports)
	}
	fatalIf(t, e.cluster.Apply(ctx, ours, true))
}

// namespacedOnly drops cluster-scoped objects (RBAC: one per cluster).
func namespacedOnly(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetNamespace() != "" {
			out = append(out, o)
		}
	}
	return out
}

// testOperatorSignals: every metric an alert or a dashboard panel reads is
// in the /metrics output of the running bridge and extauthz. One session
// through the first front (opened, proven live, closed) makes the
// label-keyed families appear even when the suite runs this case alone;
// `up` is the one name Prometheus makes itself.
func (e *env) testOperatorSignals(t *testing.T) {
	needs := e.signalMetrics(t)
	f := e.fronts[0]
	c := session(t, f, e.podAgent(t, peerName(f, "signals-a")))
	fatalIf(t, c.Close())
	var missing []string
	// The session's end is counted once the bridge sees the close: poll.
	deadline := time.Now().Add(15 * time.Second)
	for {
		// up is Prometheus's own; the Envoy names are Envoy's (no Envoy runs
		// here), spelled from its docs and source (docs/monitoring.md).
		exported := map[string]bool{"up": true}
		for _, name := range promql.EnvoyNames {
			exported[name] = true
		}
		for _, addr := range []string{e.stack.BridgeMetrics, e.stack.ExtauthzMetrics} {
			for name := range scrapeNames(t, addr) {
				exported[name] = true
			}
		}
		missing = missing[:0]
		for name := range needs {
			if !exported[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, name := range missing {
		t.Errorf("%s reads %s, which neither the bridge nor extauthz exports", strings.Join(needs[name], ", "), name)
	}
}

// signalMetrics returns every metric name the PrometheusRule and the
// Grafana dashboard read, with where each is read.
func (e *env) signalMetrics(t *testing.T) map[string][]string {
	t.Helper()
	dir := filepath.Join(e.repo, render.ChartPath, "files")
	rules, err := os.ReadFile(filepath.Join(dir, "prometheusrule-spec.yaml"))
	fatalIf(t, err)
	dash, err := os.ReadFile(filepath.Join(dir, "grafana-dashboard.json"))
	fatalIf(t, err)
	sources := map[string]map[string]string{}
	sources["PrometheusRule"], err = promql.RuleExpressions(rules)
	fatalIf(t, err)
	sources["dashboard"], err = promql.DashboardExpressions(dash)
	fatalIf(t, err)
	needs := map[string][]string{}
	for src, exprs := range sources {
		if len(exprs) == 0 {
			t.Errorf("%s: no expressions", src)
		}
		for where, expr := range exprs {
			names, err := promql.MetricNames(expr)
			if err != nil || len(names) == 0 {
				t.Errorf("%s %s: %q reads no metric (%v)", src, where, expr, err)
			}
			for _, n := range names {
				needs[n] = append(needs[n], src+" "+where)
			}
		}
	}
	return needs
}

// scrapeNames returns the series names in one /metrics answer (from its
// "# TYPE name type" lines), histogram and summary families expanded to
// their _bucket, _sum and _count series.
func scrapeNames(t *testing.T, addr string) map[string]bool {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	fatalIf(t, err)
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://127.0.0.1:" + port + "/metrics")
	fatalIf(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	fatalIf(t, err)
	out := map[string]bool{}
	for line := range strings.Lines(string(body)) {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		name := f[2]
		out[name] = true
		switch f[3] {
		case "histogram":
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case "summary":
			out[name+"_sum"], out[name+"_count"] = true, true
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s/metrics exports nothing", addr)
	}
	return out
}
