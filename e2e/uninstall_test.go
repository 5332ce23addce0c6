//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/wirekube/relay-ws/internal/test/stack"
)

// uninstallNS is the release namespace of the uninstall scenario.
const uninstallNS = "wk-leaving"

// testUninstall: the chart (with the admission policy, the Events Role in
// default, the NetworkPolicy and helm test's Pod) is
// applied for real, with what the operator and extauthz add beside it (the
// TLS Secret, Events about a WireKubePeer). The policy refuses an agent's
// create of another node's WireKubePeer. Deleting what Helm records (the
// non-hook objects: helm uninstall) removes the policy (the same create is
// then admitted) and the Role, and leaves exactly the
// test Pod, the TLS Secret and the Events; the cleanup of
// docs/alongside-chart.md#uninstall removes those and no Event of anyone else.
func (e *env) testUninstall(t *testing.T) {
	ctx := context.Background()
	fatalIf(t, e.cluster.EnsureNamespace(ctx, uninstallNS))
	t.Cleanup(func() {
		_ = e.cluster.Client.CoreV1().Namespaces().Delete(context.Background(), uninstallNS, metav1.DeleteOptions{})
	})
	e.grantAgentPeerRBAC(t)
	m := e.admissionAgent(t, "leaving-m", true)
	t.Cleanup(func() { e.restoreStackRBAC(t) })
	// The shared signing Secret is left out: the chart makes it only where a
	// cluster answers the render (helm install), never under helm template,
	// which this scenario runs; as a release object helm uninstall deletes it
	// like the others (no template keeps a resource).
	objs := e.renderChart(t, uninstallNS, "--set", "networkPolicy.mode=enforce",
		"--set", "networkPolicy.relayNamespace="+uninstallNS+",extauthz.peerNamespace="+uninstallNS,
		"--set", "extauthz.agentServiceAccounts={"+stack.Namespace+"/"+agentSA+"}",
		"--set", "helmTest.peer=leaving-node,helmTest.publicKey=q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80=")
	wantKinds(t, objs, "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "Role", "Pod")
	release, hooks := splitHooks(objs)
	if len(hooks) != 1 || hooks[0].GetKind() != "Pod" {
		for _, o := range hooks {
			t.Errorf("helm uninstall leaves %s %s", o.GetKind(), o.GetName())
		}
		t.Fatal("want it to leave only helm test's Pod of what the chart renders")
	}
	fatalIf(t, e.cluster.Apply(ctx, release, false)) // helm install
	fatalIf(t, e.cluster.Apply(ctx, hooks, false))   // helm test
	left := e.addRuntimeObjects(t)
	e.waitPolicyEnforced(t, m)

	for _, o := range release { // helm uninstall
		err := e.resource(t, o).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("uninstall %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	e.wantGone(t, "after helm uninstall", release)
	e.waitPolicyRemoved(t, m)
	for _, o := range append(append([]*unstructured.Unstructured{}, hooks...), left...) {
		if _, err := e.resource(t, o).Get(ctx, o.GetName(), metav1.GetOptions{}); err != nil {
			t.Errorf("after helm uninstall: %s %s/%s: %v, want it left behind", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	e.uninstallCleanup(t)
	e.wantGone(t, "after the cleanup", append(append([]*unstructured.Unstructured{}, hooks...), left[:2]...))
	if _, err := e.cluster.Client.CoreV1().Events(metav1.NamespaceDefault).Get(ctx, "leaving-other", metav1.GetOptions{}); err != nil {
		t.Errorf("the cleanup removed another component's Event: %v", err)
	}
	_ = e.cluster.Client.CoreV1().Events(metav1.NamespaceDefault).Delete(ctx, "leaving-other", metav1.DeleteOptions{})
}

// addRuntimeObjects creates what no chart renders: the operator's TLS Secret
// (front envoy), an Event as extauthz records it, and another component's
// Event the cleanup must keep. It returns them in that order.
func (e *env) addRuntimeObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	core := e.cluster.Client.CoreV1()
	_, err := core.Secrets(uninstallNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "wirekube-relay-gateway-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}}, metav1.CreateOptions{})
	fatalIf(t, err)
	_, err = core.Events(metav1.NamespaceDefault).Create(ctx, extauthzEvent("leaving-ours", "wirekube-extauthz"), metav1.CreateOptions{})
	fatalIf(t, err)
	_, err = core.Events(metav1.NamespaceDefault).Create(ctx, extauthzEvent("leaving-other", "kubelet"), metav1.CreateOptions{})
	fatalIf(t, err)
	ref := func(kind, ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	return []*unstructured.Unstructured{ref("Secret", uninstallNS, "wirekube-relay-gateway-tls"),
		ref("Event", metav1.NamespaceDefault, "leaving-ours"), ref("Event", metav1.NamespaceDefault, "leaving-other")}
}

// uninstallCleanup is the cleanup step of docs/alongside-chart.md#uninstall:
//
//	kubectl -n wirekube-system delete pod wirekube-relay-gateway-test
//	kubectl -n default delete events --field-selector source=wirekube-extauthz
//	kubectl -n NAMESPACE delete secret wirekube-relay-gateway-tls
func (e *env) uninstallCleanup(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	core := e.cluster.Client.CoreV1()
	// No kubelet here finishes the Pod, so it is deleted without a grace period.
	fatalIf(t, e.cluster.DeletePodNow(ctx, stack.Namespace, "wirekube-relay-gateway-test"))
	evs, err := core.Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "source=wirekube-extauthz"})
	fatalIf(t, err)
	for _, ev := range evs.Items {
		fatalIf(t, core.Events(metav1.NamespaceDefault).Delete(ctx, ev.Name, metav1.DeleteOptions{}))
	}
	fatalIf(t, core.Secrets(uninstallNS).Delete(ctx, "wirekube-relay-gateway-tls", metav1.DeleteOptions{}))
}

// waitPolicyRemoved waits until the API server admits again what the
// policy refused (its admission plugin learns of the deletion from its own
// informers): a dry-run create of another node's WireKubePeer.
func (e *env) waitPolicyRemoved(t *testing.T, a *admissionClient) {
	t.Helper()
	err := stack.WaitFor(context.Background(), nil, 60*time.Second, func(ctx context.Context) error {
		return a.createPeerOpts("leaving-probe", e.newKey(t).Base64(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	})
	if err != nil {
		t.Errorf("after helm uninstall: another node's WireKubePeer still refused: %v", err)
	}
}

// wantKinds fails unless objs holds each kind.
func wantKinds(t *testing.T, objs []*unstructured.Unstructured, kinds ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, o := range objs {
		have[o.GetKind()] = true
	}
	for _, k := range kinds {
		if !have[k] {
			t.Fatalf("the chart renders no %s", k)
		}
	}
}

// resource is the dynamic client of o's kind, in o's namespace when it has one.
func (e *env) resource(t *testing.T, o *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.cluster.Client.Discovery()))
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	fatalIf(t, err)
	if m.Scope.Name() == "namespace" {
		return e.cluster.Dynamic.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	return e.cluster.Dynamic.Resource(m.Resource)
}
