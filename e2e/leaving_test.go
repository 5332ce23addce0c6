//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wirekube/relay-ws/internal/test/stack"
)

// The API steps of docs/alongside-chart.md#rollback, on a WireKubeMesh shaped
// as the WireKube chart renders it (templates/mesh.yaml, provider managed).
// What the agent does with the object is read from WireKube v0.0.17 and main
// (pkg/agent/agent.go managedRelayDialConfig, maybeRefreshRelayEndpoint;
// pkg/controller/relayendpoint/reconciler.go); none of its code runs here.
const (
	// leavingMesh is this scenario's own mesh: no other scenario's object is touched.
	leavingMesh = "leaving-rollback"
	// deletedLB is the address the leader synced while the mesh was on tcp;
	// the chart deleted that LoadBalancer with the switch to wss.
	deletedLB = "198.51.100.10:3478"
	// newLB is the address of the LoadBalancer the chart creates again on tcp.
	newLB  = "203.0.113.20:3478"
	wssURL = "wss://relay.example.com/relay"
)

// testLeaving: rolling back to tcp and uninstalling, against the real API server.
func (e *env) testLeaving(t *testing.T) {
	t.Run("rollback_to_tcp", e.testRollbackToTCP)
	t.Run("uninstall", e.testUninstall)
}

// testRollbackToTCP: the chart upgrade to tcp leaves the deleted
// LoadBalancer's address in status.relayEndpoint; a status written through
// the main resource is dropped; written through the status subresource it
// sticks. The result is what a managed tcp agent dials first with no
// controlEndpoint: transport tcp, no controlEndpoint (a wss URL left there
// fails the agent's tcp validation), status.relayEndpoint the new address.
func (e *env) testRollbackToTCP(t *testing.T) {
	ctx := context.Background()
	meshes := e.cluster.Dynamic.Resource(meshGVR)
	created, err := meshes.Create(ctx, wssMesh(), metav1.CreateOptions{})
	fatalIf(t, err)
	t.Cleanup(func() { _ = meshes.Delete(context.Background(), leavingMesh, metav1.DeleteOptions{}) })
	fatalIf(t, unstructured.SetNestedField(created.Object, deletedLB, "status", "relayEndpoint"))
	_, err = meshes.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	fatalIf(t, err)

	// Step 2: helm upgrade --set mesh.relay.transport=tcp --set mesh.relay.controlEndpoint= (what it changes).
	_, err = meshes.Patch(ctx, leavingMesh, types.MergePatchType,
		[]byte(`{"spec":{"relay":{"managed":{"transport":"tcp","controlEndpoint":null}}}}`), metav1.PatchOptions{})
	fatalIf(t, err)
	wantMeshField(t, e, deletedLB, "status", "relayEndpoint")

	// A status in a patch of the main resource is ignored: kubectl needs --subresource=status.
	_, err = meshes.Patch(ctx, leavingMesh, types.MergePatchType,
		[]byte(`{"status":{"relayEndpoint":"`+newLB+`"}}`), metav1.PatchOptions{})
	fatalIf(t, err)
	wantMeshField(t, e, deletedLB, "status", "relayEndpoint")

	// Step 3: the new LoadBalancer's address, through the status subresource.
	_, err = meshes.Patch(ctx, leavingMesh, types.MergePatchType,
		[]byte(`{"status":{"relayEndpoint":"`+newLB+`"}}`), metav1.PatchOptions{}, "status")
	fatalIf(t, err)
	wantMeshField(t, e, newLB, "status", "relayEndpoint")
	wantMeshField(t, e, "tcp", "spec", "relay", "managed", "transport")
	wantMeshField(t, e, "managed", "spec", "relay", "provider")
	wantMeshField(t, e, "", "spec", "relay", "managed", "controlEndpoint")
}

// wssMesh is the WireKube chart's mesh on wss with relay.service.type LoadBalancer.
func wssMesh() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "wirekube.io/v1alpha1", "kind": "WireKubeMesh",
		"metadata": map[string]any{"name": leavingMesh},
		"spec": map[string]any{"meshCIDR": "100.96.0.0/11", "relay": map[string]any{
			"mode": "auto", "provider": "managed",
			"managed": map[string]any{"replicas": int64(1), "serviceType": "LoadBalancer", "port": int64(3478),
				"transport": "wss", "controlEndpoint": wssURL},
		}},
	}}
}

// wantMeshField checks one string field of the live mesh ("" = absent).
func wantMeshField(t *testing.T, e *env, want string, path ...string) {
	t.Helper()
	got, err := e.cluster.Dynamic.Resource(meshGVR).Get(context.Background(), leavingMesh, metav1.GetOptions{})
	fatalIf(t, err)
	v, _, err := unstructured.NestedString(got.Object, path...)
	fatalIf(t, err)
	if v != want {
		t.Errorf("mesh %v = %q, want %q", path, v, want)
	}
}

// splitHooks separates what `helm uninstall` deletes from what it leaves:
// hooks (helm test's Pod: Helm does not record them in the release) and
// objects marked helm.sh/resource-policy: keep.
func splitHooks(objs []*unstructured.Unstructured) (deleted, left []*unstructured.Unstructured) {
	for _, o := range objs {
		_, hook := o.GetAnnotations()["helm.sh/hook"]
		if hook || o.GetAnnotations()["helm.sh/resource-policy"] == "keep" {
			left = append(left, o)
		} else {
			deleted = append(deleted, o)
		}
	}
	return deleted, left
}

// restoreStackRBAC applies manifests/base's RBAC again: the chart's objects
// share the cluster-scoped and `default` names the running extauthz uses.
func (e *env) restoreStackRBAC(t *testing.T) {
	ctx := context.Background()
	objs, err := stack.RenderKustomize(ctx, filepath.Join(e.repo, "manifests", "base"))
	if err != nil {
		t.Errorf("restore RBAC: %v", err)
		return
	}
	var rbac []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			rbac = append(rbac, o)
		}
	}
	if err := e.cluster.Apply(ctx, rbac, false); err != nil {
		t.Errorf("restore RBAC: %v", err)
	}
}

// extauthzEvent is an Event as extauthz records it about a WireKubePeer
// (extauthz/events_lanes.go): namespace default, source wirekube-extauthz.
func extauthzEvent(name, component string) *corev1.Event {
	now := metav1.Now()
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{APIVersion: "wirekube.io/v1alpha1", Kind: "WireKubePeer",
			Name: "leaving-node"},
		Reason: "token_expired", Message: "leaving", Type: corev1.EventTypeWarning,
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source:              corev1.EventSource{Component: component},
		ReportingController: component, ReportingInstance: "leaving",
	}
}

// wantGone reports every object of objs the API server still has.
func (e *env) wantGone(t *testing.T, what string, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		_, err := e.resource(t, o).Get(context.Background(), o.GetName(), metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: %s %s/%s still there (%v)", what, o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}
