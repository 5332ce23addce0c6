//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testagent"
)

// fullNamespace holds the chart's PodDisruptionBudget and the three gateway
// Pods of testFullReplicaEviction.
const fullNamespace = "wk-full-eviction"

// testFullReplicaEviction: which gateway replica a node drain may evict
// while one replica is full, against the real kube-apiserver's eviction
// subresource and the chart's PodDisruptionBudget as rendered (3 replicas).
//
// The full state is a real bridge's: a second replica with the chart's
// --unready-at and --max-sessions=1 holds one session through the front
// (wirekube_bridge_full is 1). Each of three Pods gets the Ready condition
// its bridge's /readyz gives (one full, two healthy), written through the
// status subresource as the kubelet would. No controller manager runs
// here, so the budget's status is written as the disruption controller
// computes it (pkg/controller/disruption: desired = expected - maxUnavailable,
// allowed = Ready Pods - desired, never below 0).
//
// Full is a healthy state: every replica, the full one included, may be
// evicted one at a time, and after one eviction the budget blocks the rest,
// the full one included.
func (e *env) testFullReplicaEviction(t *testing.T) {
	ctx := context.Background()
	pdb, unreadyAt := e.renderedBudget(t)
	rep, err := e.stack.StartReplicas(ctx, "--max-sessions=1", "--unready-at="+unreadyAt)
	fatalIf(t, err)
	defer func() { fatalIf(t, rep.Close()) }()
	e.fillReplica(t, rep)

	fullReady := readyzStatus(rep.Bridge2Metrics) == http.StatusOK
	full, err := scrape("http://" + rep.Bridge2Metrics + "/metrics")
	fatalIf(t, err)
	if !strings.Contains(full, "\nwirekube_bridge_full 1\n") {
		t.Fatalf("the second replica holds its --max-sessions=1 but wirekube_bridge_full is not 1")
	}
	healthyReady := readyzStatus(e.stack.BridgeMetrics) == http.StatusOK

	fatalIf(t, e.cluster.EnsureNamespace(ctx, fullNamespace))
	t.Cleanup(func() {
		_ = e.cluster.Client.CoreV1().Namespaces().Delete(context.Background(), fullNamespace, metav1.DeleteOptions{})
	})
	fatalIf(t, e.cluster.Apply(ctx, []*unstructured.Unstructured{pdb}, false))
	// No controller manager runs here to create the namespace's default ServiceAccount the Pods are admitted with.
	_, err = e.cluster.Client.CoreV1().ServiceAccounts(fullNamespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	fatalIf(t, err)
	labels := pdb.Object["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)
	pods := map[string]bool{"gateway-full": fullReady, "gateway-a": healthyReady, "gateway-b": healthyReady}
	for name, ready := range pods {
		e.fullGatewayPod(t, name, labels, ready)
	}
	e.writeBudgetStatus(t, pdb.GetName(), 3)

	want := map[string]string{"gateway-full": "evictable", "gateway-a": "evictable", "gateway-b": "evictable"}
	for name, w := range want {
		if got := e.evict(t, name, true); got != w {
			t.Errorf("one replica full: eviction of %s (dry run) %s, want %s", name, got, w)
		}
	}
	if got := e.evict(t, "gateway-a", false); got != "evictable" {
		t.Fatalf("one replica full: eviction of gateway-a %s, want evictable", got)
	}
	if got := e.evict(t, "gateway-full", true); got != "blocked" {
		t.Errorf("after gateway-a was evicted: eviction of the full replica (dry run) %s, want blocked by the budget", got)
	}
}

// renderedBudget is the chart's PodDisruptionBudget for 3 replicas in
// fullNamespace, and the bridge's --unready-at the same render passes.
func (e *env) renderedBudget(t *testing.T) (*unstructured.Unstructured, string) {
	t.Helper()
	var pdb *unstructured.Unstructured
	unreadyAt := ""
	for _, o := range e.renderChart(t, fullNamespace, "--set", "replicas=3") {
		switch o.GetKind() {
		case "PodDisruptionBudget":
			pdb = o
		case "Deployment":
			unreadyAt = bridgeFlag(t, o, "--unready-at=")
		}
	}
	if pdb == nil || unreadyAt == "" {
		t.Fatalf("the chart rendered no PodDisruptionBudget (%v) or no --unready-at (%q)", pdb != nil, unreadyAt)
	}
	return pdb, unreadyAt
}

// bridgeFlag is the value of the bridge container's flag with prefix.
func bridgeFlag(t *testing.T, deploy *unstructured.Unstructured, prefix string) string {
	t.Helper()
	var d struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	fatalIf(t, runtime.DefaultUnstructuredConverter.FromUnstructured(deploy.Object, &d))
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if c.Name == "bridge" && strings.HasPrefix(a, prefix) {
				return strings.TrimPrefix(a, prefix)
			}
		}
	}
	return ""
}

// fillReplica dials agents through the front of both replicas until the
// second one holds a session (its --max-sessions).
func (e *env) fillReplica(t *testing.T, rep *stack.Replicas) {
	t.Helper()
	f := front{name: "nginx", url: "wss://" + rep.NginxAddr + "/relay", tls: e.fronts[0].tls}
	for try := 0; try < 16; try++ {
		id := e.podAgent(t, peerName(f, fmt.Sprintf("full-%d", try)))
		c, err := testagent.Dial(context.Background(), f.opts(id), id.key)
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		body, err := scrape("http://" + rep.Bridge2Metrics + "/metrics")
		fatalIf(t, err)
		if strings.Contains(body, "\nwirekube_bridge_sessions_active 1\n") {
			return
		}
	}
	t.Fatal("16 agents through the front of both replicas, none on the second one")
}

// fullGatewayPod creates a running gateway Pod and writes its Ready condition
// through the status subresource.
func (e *env) fullGatewayPod(t *testing.T, name string, labels map[string]any, ready bool) {
	t.Helper()
	ctx := context.Background()
	l := map[string]string{}
	for k, v := range labels {
		l[k] = v.(string)
	}
	pods := e.cluster.Client.CoreV1().Pods(fullNamespace)
	pod, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Spec: corev1.PodSpec{NodeName: "node-" + name,
			Containers: []corev1.Container{{Name: "bridge", Image: "registry.k8s.io/pause:3.10"}}},
	}, metav1.CreateOptions{})
	fatalIf(t, err)
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	fatalIf(t, err)
}

// writeBudgetStatus writes the budget's status as the disruption
// controller would for expected replicas.
func (e *env) writeBudgetStatus(t *testing.T, name string, expected int32) {
	t.Helper()
	ctx := context.Background()
	pdbs := e.cluster.Client.PolicyV1().PodDisruptionBudgets(fullNamespace)
	pdb, err := pdbs.Get(ctx, name, metav1.GetOptions{})
	fatalIf(t, err)
	pods, err := e.cluster.Client.CoreV1().Pods(fullNamespace).List(ctx, metav1.ListOptions{})
	fatalIf(t, err)
	var healthy int32
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				healthy++
			}
		}
	}
	desired := max(0, expected-pdb.Spec.MaxUnavailable.IntVal)
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, ExpectedPods: expected,
		CurrentHealthy: healthy, DesiredHealthy: desired, DisruptionsAllowed: max(0, healthy-desired)}
	_, err = pdbs.UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
	fatalIf(t, err)
}

// evict asks the eviction subresource for the Pod: "evictable", "blocked"
// (429, the budget) or the error.
func (e *env) evict(t *testing.T, name string, dryRun bool) string {
	t.Helper()
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fullNamespace}}
	if dryRun {
		ev.DeleteOptions = &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	}
	err := e.cluster.Client.PolicyV1().Evictions(fullNamespace).Evict(context.Background(), ev)
	switch {
	case err == nil:
		return "evictable"
	case apierrors.IsTooManyRequests(err):
		return "blocked"
	}
	return err.Error()
}
