//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// admissionClient sends WireKubePeer requests of the shapes WireKube's agent
// sends (controller-runtime's client: Create is a POST of the whole object,
// Patch with client.MergeFrom a JSON merge patch of the changed fields only,
// Update a PUT of the whole object with its resourceVersion, Delete a DELETE
// with the object's name). Every method names the WireKube function whose
// request it reproduces.
type admissionClient struct {
	node    string
	nodeUID types.UID
	peers   dynamic.ResourceInterface
	// ns and podName are the agent Pod's ("" for a token bound to no Pod);
	// pods and meshes serve agentadmission_shapes_test.go.
	ns, podName string
	pods        dynamic.NamespaceableResourceInterface
	meshes      dynamic.ResourceInterface
}

func (a *admissionClient) pod(ns string) dynamic.ResourceInterface { return a.pods.Namespace(ns) }

// upsertOwnPeerCreate: pkg/agent/agent.go upsertOwnPeer, the peer does not
// exist yet: Create of the peer named after the node, labelled
// wirekube.io/node, owned by its Node (nodeOwnerReferences: apiVersion v1,
// kind Node, name, uid), spec publicKey, endpoint, persistentKeepalive 25 and
// the mesh IP in allowedIPs (applyMeshIP).
func (a *admissionClient) upsertOwnPeerCreate(key string) error {
	u := peerObject(a.node, key)
	u.SetLabels(map[string]string{agentManagedLabel: a.node})
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: a.node, UID: a.nodeUID}})
	_, err := a.peers.Create(context.Background(), u, metav1.CreateOptions{})
	return err
}

// upsertOwnPeerPatch: pkg/agent/agent.go upsertOwnPeer, the peer exists: a
// merge patch of the own peer's spec.publicKey, spec.endpoint (when STUN
// found one) and spec.allowedIPs (applyMeshIP, applyNodeInternalIP).
func (a *admissionClient) upsertOwnPeerPatch(key, endpoint string) error {
	spec := map[string]any{"publicKey": key, "allowedIPs": []string{"10.200.0.9/32", "192.0.2.9/32"}}
	if endpoint != "" {
		spec["endpoint"] = endpoint
	}
	return a.mergePatch(a.node, map[string]any{"spec": spec}, "")
}

// updateOwnStatus: pkg/agent/agent.go updateOwnStatus and
// updateDiscoveryMethod: a merge patch of the own peer's status
// subresource (the policy does not match it: a status write cannot change
// spec).
func (a *admissionClient) updateOwnStatus() error {
	return a.mergePatch(a.node, map[string]any{"status": map[string]any{"endpointDiscoveryMethod": "stun", "natType": "cone"}}, "status")
}

// reflectNATEndpoint: pkg/agent/agent.go reflectNATEndpoints: a merge patch
// of ANOTHER peer's spec.endpoint with the address its WireGuard handshakes
// come from.
func (a *admissionClient) reflectNATEndpoint(peer, endpoint string) error {
	return a.mergePatch(peer, map[string]any{"spec": map[string]any{"endpoint": endpoint}}, "")
}

// injectGatewayRoutes: pkg/agent/gateway.go injectGatewayRoutes: Get of
// ANOTHER peer (the elected gateway), then Update (PUT) of the whole object
// with the gateway CIDRs added to spec.allowedIPs and recorded in the
// wirekube.io/gateway-cidrs annotation.
func (a *admissionClient) injectGatewayRoutes(peer, cidr string) error {
	return a.update(peer, func(u *unstructured.Unstructured) {
		ips, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "allowedIPs")
		_ = unstructured.SetNestedStringSlice(u.Object, append(ips, cidr), "spec", "allowedIPs")
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[gatewayCIDRs] = cidr
		u.SetAnnotations(ann)
	})
}

// cleanupOrphanedPeer: pkg/agent/agent.go cleanupOrphanedPeers: Delete of
// ANOTHER agent-managed peer whose Node is not in the Node list.
func (a *admissionClient) cleanupOrphanedPeer(peer string) error {
	return a.peers.Delete(context.Background(), peer, metav1.DeleteOptions{})
}

// The moves below are no upstream agent's: node M's steps to take V's key.

// patchKey merge-patches peer's spec.publicKey (the first step, in
// the shape upsertOwnPeer uses for its own peer).
func (a *admissionClient) patchKey(peer, key string) error {
	return a.mergePatch(peer, map[string]any{"spec": map[string]any{"publicKey": key}}, "")
}

// updateKey is the same move in the Update shape of injectGatewayRoutes.
func (a *admissionClient) updateKey(peer, key string) error {
	return a.update(peer, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, key, "spec", "publicKey")
	})
}

// stripOwners removes peer's Node owner (merge patch to null), which would
// make a Node-owned peer deletable as a legacy orphan.
func (a *admissionClient) stripOwners(peer string) error {
	return a.mergePatch(peer, map[string]any{"metadata": map[string]any{"ownerReferences": nil}}, "")
}

// createPeer creates a peer of any name in the Create shape of
// upsertOwnPeer (labelled, no owner).
func (a *admissionClient) createPeer(name, key string) error {
	return a.createPeerOpts(name, key, metav1.CreateOptions{})
}

func (a *admissionClient) createPeerOpts(name, key string, o metav1.CreateOptions) error {
	u := peerObject(name, key)
	u.SetLabels(map[string]string{agentManagedLabel: name})
	_, err := a.peers.Create(context.Background(), u, o)
	return err
}

func (a *admissionClient) mergePatch(peer string, patch map[string]any, subresource string) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	var sub []string
	if subresource != "" {
		sub = []string{subresource}
	}
	_, err = a.peers.Patch(context.Background(), peer, types.MergePatchType, b, metav1.PatchOptions{}, sub...)
	return err
}

func (a *admissionClient) update(peer string, change func(*unstructured.Unstructured)) error {
	u, err := a.peers.Get(context.Background(), peer, metav1.GetOptions{})
	if err != nil {
		return err
	}
	change(u)
	_, err = a.peers.Update(context.Background(), u, metav1.UpdateOptions{})
	return err
}

// peerObject is a WireKubePeer with the spec fields the agent sets.
func peerObject(name, key string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "wirekube.io/v1alpha1",
		"kind":       "WireKubePeer",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{"publicKey": key, "endpoint": "198.51.100.10:51820",
			"allowedIPs": []any{"10.200.0.10/32"}, "persistentKeepalive": int64(25)},
	}}
}

func asStatus(err error, st *apierrors.APIStatus) bool { return errors.As(err, st) }

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
