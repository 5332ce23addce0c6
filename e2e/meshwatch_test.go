//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

const (
	meshWatchMesh = "mw-e2e"
	// meshWatchURL is the gateway's URL in this scenario; meshWatchForeign
	// is a node's own, where the agents' tokens must not go.
	meshWatchURL     = "wss://relay.mw-e2e.test/relay"
	meshWatchForeign = "wss://collector.mw-e2e.test/relay"
)

// testMeshWatch: extauthz, with manifests/base's RBAC, watches the real
// WireKubeMesh (WireKube's CRD) and reports a mesh rewritten to ws://, then
// — given its public URL — one rewritten to another wss:// host: the gauge
// by target and a Warning Event on the mesh, never the URL.
func (e *env) testMeshWatch(t *testing.T) {
	ctx := context.Background()
	meshes := e.cluster.Dynamic.Resource(meshGVR)
	_, err := meshes.Create(ctx, meshWithRelay(map[string]any{"mode": "always", "provider": "external",
		"external": map[string]any{"transport": "ws", "controlEndpoint": "ws://198.51.100.9:8080/relay"}}), metav1.CreateOptions{})
	fatalIf(t, err)
	t.Cleanup(func() { _ = meshes.Delete(context.Background(), meshWatchMesh, metav1.DeleteOptions{}) })
	e.waitExtauthzMetricLines(t, targetLine(contract.MeshRelayWSCleartext, 1), contract.MetricMeshRelayWatchSynced+" 1")
	ev := e.waitMeshEvent(t, "ws_cleartext")
	if ev.Type != corev1.EventTypeWarning || ev.Source.Component != "wirekube-extauthz" || strings.Contains(ev.Message, "198.51.100.9") {
		t.Fatalf("Event %+v: want a Warning from wirekube-extauthz without the URL", ev)
	}

	fatalIf(t, e.stack.RestartExtauthz(ctx, []string{"--expected-relay-url=" + meshWatchURL}))
	defer func() { fatalIf(t, e.stack.RestartExtauthz(ctx, nil)) }()
	e.setMeshControlEndpoint(t, meshWatchURL)
	e.waitExtauthzMetricLines(t, targetLine(contract.MeshRelayThisGateway, 1), targetLine(contract.MeshRelayWSCleartext, 0))
	e.setMeshControlEndpoint(t, meshWatchForeign)
	e.waitExtauthzMetricLines(t, targetLine(contract.MeshRelayOtherWSS, 1), targetLine(contract.MeshRelayThisGateway, 0))
	ev = e.waitMeshEvent(t, "other_wss")
	if ev.Type != corev1.EventTypeWarning || strings.Contains(ev.Message, "collector") {
		t.Fatalf("Event %+v: want a Warning without the URL", ev)
	}
}

func meshWithRelay(relay map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"meshCIDR": "100.96.0.0/16", "relay": relay}}}
	u.SetAPIVersion("wirekube.io/v1alpha1")
	u.SetKind("WireKubeMesh")
	u.SetName(meshWatchMesh)
	return u
}

// setMeshControlEndpoint rewrites the mesh to managed wss at url, as a
// node's agent may with WireKube's ClusterRole (a full update).
func (e *env) setMeshControlEndpoint(t *testing.T, url string) {
	t.Helper()
	meshes := e.cluster.Dynamic.Resource(meshGVR)
	u, err := meshes.Get(context.Background(), meshWatchMesh, metav1.GetOptions{})
	fatalIf(t, err)
	fatalIf(t, unstructured.SetNestedMap(u.Object, map[string]any{"mode": "always", "provider": "managed",
		"managed": map[string]any{"transport": "wss", "controlEndpoint": url}}, "spec", "relay"))
	_, err = meshes.Update(context.Background(), u, metav1.UpdateOptions{})
	fatalIf(t, err)
}

func targetLine(target contract.MeshRelayTarget, n int) string {
	return fmt.Sprintf("%s{target=%q} %d", contract.MetricMeshRelayTargets, target, n)
}

// waitMeshEvent waits for an Event of reason on the mesh (found by the
// mesh's kind, name and UID, as kubectl describe finds it).
func (e *env) waitMeshEvent(t *testing.T, reason string) corev1.Event {
	t.Helper()
	ctx := context.Background()
	u, err := e.cluster.Dynamic.Resource(meshGVR).Get(ctx, meshWatchMesh, metav1.GetOptions{})
	fatalIf(t, err)
	name, ns, kind, uid := u.GetName(), "", u.GetKind(), string(u.GetUID())
	events := e.cluster.Client.CoreV1().Events("")
	sel := events.GetFieldSelector(&name, &ns, &kind, &uid).String()
	var got corev1.Event
	testutil.EventuallyWithin(t, 30*time.Second, reason+" Event on WireKubeMesh "+name, func() bool {
		l, err := events.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false
		}
		for _, ev := range l.Items {
			if ev.Reason == reason {
				got = ev
				return true
			}
		}
		return false
	})
	return got
}
