//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// testAgentPodAdmission: with the shipped policy installed, an agent may
// annotate its own Pod as the upstream agent does, and node M's agent can
// change nothing else of any Pod: not V's image (every patch type), not its
// activeDeadlineSeconds, not a Pod of its own name in another namespace, not
// its own Pod's spec, labels or other annotations.
func (e *env) testAgentPodAdmission(t *testing.T) {
	e.grantAgentPeerRBAC(t)
	e.installPeerAdmission(t)
	v, m := e.admissionAgent(t, "aw-v", true), e.admissionAgent(t, "aw-m", true)
	e.waitPolicyEnforced(t, m)

	wantPolicyAdmitted(t, "V annotates its own Pod", v.annotateOwnPod("10.0.0.5"))
	wantPolicyAdmitted(t, "V changes its own annotation", v.annotateOwnPod("10.0.0.6"))

	for pt, body := range podImagePatches(v.podName, "registry.example/m-agent:evil") {
		wantPolicyRefused(t, "M patches V's image ("+string(pt)+")", m.patchPod(v.ns, v.podName, pt, body))
	}
	wantPolicyRefused(t, "M sets V's activeDeadlineSeconds", m.patchPod(v.ns, v.podName, types.MergePatchType,
		[]byte(`{"spec":{"activeDeadlineSeconds":1}}`)))
	wantPolicyRefused(t, "M annotates V's Pod", m.patchPod(v.ns, v.podName, types.MergePatchType,
		annotationPatch(nodeInternalIP, "10.0.0.66")))
	other := e.podElsewhere(t, "default", m.podName)
	wantPolicyRefused(t, "M patches the Pod of its own name in another namespace",
		m.patchPod(other, m.podName, types.MergePatchType, annotationPatch(nodeInternalIP, "10.0.0.7")))
	for pt, body := range podImagePatches(m.podName, "registry.example/m-agent:other") {
		wantPolicyRefused(t, "M patches its own image ("+string(pt)+")", m.patchPod(m.ns, m.podName, pt, body))
	}
	wantPolicyRefused(t, "M labels its own Pod", m.patchPod(m.ns, m.podName, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"app":"wirekube-relay"}}}`)))
	wantPolicyRefused(t, "M adds another annotation to its own Pod", m.patchPod(m.ns, m.podName, types.MergePatchType,
		annotationPatch("wirekube.io/other", "x")))
	// A server-side apply that would create needs the create verb, which
	// the agent role lacks (the policy refuses it too where a role grants it).
	wantRBACRefused(t, "M server-side applies a new Pod", m.patchPod(m.ns, "aw-new", types.ApplyYAMLPatchType,
		podImagePatches("aw-new", "registry.example/m-agent:evil")[types.ApplyYAMLPatchType]))
	wantRBACRefused(t, "M updates V's Pod", m.updatePod(v.ns, v.podName, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(1), "spec", "activeDeadlineSeconds")
	}))
	if img := e.podImage(t, v.ns, v.podName); img != "wirekube/agent:e2e" {
		t.Errorf("V's image is %q after the refusals", img)
	}

	u := e.admissionAgent(t, "aw-unbound", false)
	wantPolicyRefused(t, "a token bound to no Pod annotates V's Pod", u.patchPod(v.ns, v.podName, types.MergePatchType,
		annotationPatch(nodeInternalIP, "10.0.0.8")))
}

// testAgentMeshAdmission: an agent may fill the mesh's unset spec defaults
// as applyMeshDefaults does and write the mesh status; node M's agent cannot
// rewrite spec.relay (the relay token's destination), change a set default,
// touch the metadata, or patch or create a mesh at all. status.relayEndpoint
// stays writable by every agent (docs/revocation.md#admission).
func (e *env) testAgentMeshAdmission(t *testing.T) {
	e.grantAgentPeerRBAC(t)
	e.installPeerAdmission(t)
	v, m := e.admissionAgent(t, "awm-v", true), e.admissionAgent(t, "awm-m", true)
	e.waitPolicyEnforced(t, m)
	mesh := e.meshWithRelay(t, "aw-mesh")

	wantPolicyAdmitted(t, "V fills the mesh defaults", v.applyMeshDefaults(mesh))
	wantPolicyAdmitted(t, "V writes the ready counts", v.meshStatus(mesh, map[string]any{"readyPeers": 1, "totalPeers": 2}))
	wantPolicyAdmitted(t, "the leader writes status.relayEndpoint", v.meshStatus(mesh, map[string]any{"relayEndpoint": "203.0.113.5:3478"}))

	set := func(v any, path ...string) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, v, path...) }
	}
	for _, tt := range []struct {
		what   string
		change func(*unstructured.Unstructured)
	}{
		{"points managed.controlEndpoint at its own ws:// URL", set("ws://198.51.100.66/relay", "spec", "relay", "managed", "controlEndpoint")},
		{"switches the transport to ws", set("ws", "spec", "relay", "managed", "transport")},
		{"adds an external relay", set(map[string]any{"controlEndpoint": "ws://198.51.100.66/relay"}, "spec", "relay", "external")},
		{"removes spec.relay", func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "relay") }},
		{"changes a set listenPort", set(int64(51821), "spec", "listenPort")},
		{"replaces the set STUN servers", set([]any{"stun:198.51.100.66:3478"}, "spec", "stunServers")},
		{"changes another spec field", set("10.99.0.0/16", "spec", "meshCIDR")},
		{"adds an owner", func(u *unstructured.Unstructured) {
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: m.node, UID: m.nodeUID}})
		}},
		{"adds a finalizer", func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"example.com/hold"}) }},
		{"adds an annotation", func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"a": "b"}) }},
	} {
		wantPolicyRefused(t, "M "+tt.what, m.updateMesh(mesh, tt.change))
	}
	// An unset default may take the agent's value only.
	bare := e.meshWithRelay(t, "aw-mesh-bare")
	wantPolicyRefused(t, "M fills unset stunServers with its own STUN server", m.updateMesh(bare,
		set([]any{"stun:198.51.100.66:3478"}, "spec", "stunServers")))
	wantPolicyRefused(t, "M fills an unset mtu with a value of its own", m.updateMesh(bare, set(int64(9000), "spec", "mtu")))
	if got := e.meshControlEndpoint(t, mesh); got != "wss://relay.example.com/relay" {
		t.Errorf("the mesh's managed.controlEndpoint is %q after the refusals", got)
	}
	// Patching is not in the agent's role: RBAC refuses every patch type
	// before admission, server-side apply (which could create) included.
	relay := []byte(`{"spec":{"relay":{"managed":{"controlEndpoint":"ws://198.51.100.66/relay"}}}}`)
	for _, pt := range []types.PatchType{types.MergePatchType, types.JSONPatchType} {
		body := relay
		if pt == types.JSONPatchType {
			body = []byte(`[{"op":"replace","path":"/spec/relay/managed/controlEndpoint","value":"ws://198.51.100.66/relay"}]`)
		}
		wantRBACRefused(t, "M patches the mesh ("+string(pt)+")", m.patchMesh(mesh, pt, body))
	}
	wantRBACRefused(t, "M applies a new mesh", m.patchMesh("aw-new-mesh", types.ApplyYAMLPatchType,
		[]byte(`{"apiVersion":"wirekube.io/v1alpha1","kind":"WireKubeMesh","metadata":{"name":"aw-new-mesh"},"spec":{}}`)))
	// What stays possible: status.relayEndpoint, dialled by tcp agents without
	// a controlEndpoint.
	wantPolicyAdmitted(t, "M writes status.relayEndpoint", m.meshStatus(mesh, map[string]any{"relayEndpoint": "198.51.100.66:3478"}))
}

// wantRBACRefused wants a 403 of the authorizer (the agent role lacks the
// verb), not of the policy.
func wantRBACRefused(t *testing.T, what string, err error) {
	t.Helper()
	var st apierrors.APIStatus
	switch {
	case err == nil:
		t.Errorf("%s: admitted, want refused by RBAC", what)
	case !apierrors.IsForbidden(err) || !asStatus(err, &st) || strings.Contains(st.Status().Message, "ValidatingAdmissionPolicy"):
		t.Errorf("%s: %v, want RBAC's 403", what, err)
	}
}

// meshWithRelay creates (as admin) a WireKubeMesh as an operator writes it:
// a managed wss relay and a listenPort of its own, the other defaults unset.
func (e *env) meshWithRelay(t *testing.T, name string) string {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "wirekube.io/v1alpha1", "kind": "WireKubeMesh", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"listenPort": int64(51000), "meshCIDR": "10.200.0.0/16",
			"relay": map[string]any{"provider": "managed", "mode": "auto",
				"managed": map[string]any{"transport": "wss", "controlEndpoint": "wss://relay.example.com/relay"}}},
	}}
	_, err := e.cluster.Dynamic.Resource(meshGVR).Create(context.Background(), u, metav1.CreateOptions{})
	fatalIf(t, err)
	t.Cleanup(func() {
		_ = e.cluster.Dynamic.Resource(meshGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

func (e *env) meshControlEndpoint(t *testing.T, name string) string {
	t.Helper()
	u, err := e.cluster.Dynamic.Resource(meshGVR).Get(context.Background(), name, metav1.GetOptions{})
	fatalIf(t, err)
	s, _, _ := unstructured.NestedString(u.Object, "spec", "relay", "managed", "controlEndpoint")
	return s
}

// podElsewhere creates (as admin) a Pod named name, run by a
// ServiceAccount named like the agent's, in namespace ns.
func (e *env) podElsewhere(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	_, err := e.cluster.CreateServiceAccount(ctx, ns, agentSA)
	fatalIf(t, err)
	_, err = e.cluster.CreatePod(ctx, ns, name, agentSA, "")
	fatalIf(t, err)
	return ns
}

func (e *env) podImage(t *testing.T, ns, name string) string {
	t.Helper()
	p, err := e.cluster.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	fatalIf(t, err)
	return p.Spec.Containers[0].Image
}
