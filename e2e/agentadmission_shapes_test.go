//go:build e2e

package e2e

import (
	"context"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The requests an agent sends with the other grants of WireKube's agent
// ClusterRole (pods get, patch; wirekubemeshes get, list, update and their
// status): the upstream agent's shapes (v0.0.17 and main 87a21b8 send the
// same ones; none of its code is used here), and node M's moves on victim
// V's objects in every verb and patch type the role allows.

var (
	podGVR  = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	meshGVR = schema.GroupVersionResource{Group: "wirekube.io", Version: "v1alpha1", Resource: "wirekubemeshes"}
)

// nodeInternalIP is the annotation pkg/agent/agent.go annotateOwnPod sets on
// the agent's own Pod.
const nodeInternalIP = "wirekube.io/node-internal-ip"

// annotateOwnPod: pkg/agent/agent.go annotateOwnPod: Get of the own Pod
// (POD_NAME, POD_NAMESPACE), then a JSON merge patch (client.MergeFrom) of
// metadata.annotations[wirekube.io/node-internal-ip] alone.
func (a *admissionClient) annotateOwnPod(ip string) error {
	if _, err := a.pod(a.ns).Get(context.Background(), a.podName, metav1.GetOptions{}); err != nil {
		return err
	}
	return a.patchPod(a.ns, a.podName, types.MergePatchType, annotationPatch(nodeInternalIP, ip))
}

// applyMeshDefaults: pkg/agent/agent.go applyMeshDefaults: Get of the mesh,
// then Update (PUT) of the whole object with the zero-valued
// spec.listenPort, interfaceName, mtu and stunServers set to the agent's
// defaults, every other field as read.
func (a *admissionClient) applyMeshDefaults(mesh string) error {
	return a.updateMesh(mesh, func(u *unstructured.Unstructured) {
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		fill := map[string]any{"listenPort": int64(51820), "interfaceName": "wire_kube", "mtu": int64(1420),
			"stunServers": []any{"stun:stun.l.google.com:19302", "stun:stun1.l.google.com:19302"}}
		for k, v := range fill {
			if _, set := spec[k]; !set {
				spec[k] = v
			}
		}
		_ = unstructured.SetNestedMap(u.Object, spec, "spec")
	})
}

// meshStatus: pkg/agent/agent.go updateStatus (every agent: readyPeers,
// totalPeers) and pkg/controller/relayendpoint Reconcile (the leader:
// relayEndpoint): JSON merge patches of the mesh's status subresource.
func (a *admissionClient) meshStatus(mesh string, status map[string]any) error {
	b, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = a.meshes.Patch(context.Background(), mesh, types.MergePatchType, b, metav1.PatchOptions{}, "status")
	return err
}

// The moves below are no upstream agent's.

// podImagePatches are the four patch types that change Pod name's first
// container image (the container is named agent, as stack.CreatePod makes
// it).
func podImagePatches(name, image string) map[types.PatchType][]byte {
	return map[types.PatchType][]byte{
		types.MergePatchType:          []byte(`{"spec":{"containers":[{"name":"agent","image":"` + image + `"}]}}`),
		types.StrategicMergePatchType: []byte(`{"spec":{"containers":[{"name":"agent","image":"` + image + `"}]}}`),
		types.JSONPatchType:           []byte(`[{"op":"replace","path":"/spec/containers/0/image","value":"` + image + `"}]`),
		types.ApplyYAMLPatchType: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `"},` +
			`"spec":{"containers":[{"name":"agent","image":"` + image + `"}]}}`),
	}
}

// patchPod sends one patch; an apply patch gets M's field manager and
// force (it takes the field from its owner).
func (a *admissionClient) patchPod(ns, name string, pt types.PatchType, body []byte) error {
	o := metav1.PatchOptions{}
	if pt == types.ApplyYAMLPatchType || pt == types.ApplyCBORPatchType {
		o.FieldManager, o.Force = "node-m", new(true)
	}
	_, err := a.pod(ns).Patch(context.Background(), name, pt, body, o)
	return err
}

// updatePod is a PUT of the whole Pod (the agent role has no update verb on
// Pods: RBAC refuses it before admission).
func (a *admissionClient) updatePod(ns, name string, change func(*unstructured.Unstructured)) error {
	u, err := a.pod(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	change(u)
	_, err = a.pod(ns).Update(context.Background(), u, metav1.UpdateOptions{})
	return err
}

// updateMesh is a Get then a PUT of the whole mesh, the verb
// applyMeshDefaults uses.
func (a *admissionClient) updateMesh(mesh string, change func(*unstructured.Unstructured)) error {
	u, err := a.meshes.Get(context.Background(), mesh, metav1.GetOptions{})
	if err != nil {
		return err
	}
	change(u)
	_, err = a.meshes.Update(context.Background(), u, metav1.UpdateOptions{})
	return err
}

// patchMesh sends a patch of the mesh (the agent role has no patch verb on
// meshes: RBAC refuses every patch type, server-side apply included).
func (a *admissionClient) patchMesh(mesh string, pt types.PatchType, body []byte) error {
	o := metav1.PatchOptions{}
	if pt == types.ApplyYAMLPatchType {
		o.FieldManager, o.Force = "node-m", new(true)
	}
	_, err := a.meshes.Patch(context.Background(), mesh, pt, body, o)
	return err
}

func annotationPatch(key, value string) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	return b
}
