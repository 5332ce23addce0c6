package keyhistory

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/wirekube/relay-ws/relayproto"
)

// OwnerOf is the owner of WireKubePeer u (history.go): the Node its
// ownerReference names when that Node has the peer's own name (what
// WireKube's agent sets, pkg/agent/agent.go nodeOwnerReferences), else
// the peer itself. A reference to a Node of another name is no evidence:
// with the admission policy an agent may still set any reference on its
// own peer.
func OwnerOf(u *unstructured.Unstructured) Owner {
	for _, r := range u.GetOwnerReferences() {
		if r.APIVersion == "v1" && r.Kind == "Node" && r.Name == u.GetName() && r.UID != "" {
			return Owner{node: true, name: r.Name}
		}
	}
	return Owner{name: u.GetName(), uid: u.GetUID()}
}

// unwrapDeleted is the last known object of a delete notification: the
// object itself, or the one a tombstone carries (the informer missed the
// delete and found the object gone at a relist).
func unwrapDeleted(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// PeerHandler feeds the history from the WireKubePeer informer; keyOf
// reads a peer's spec.publicKey (false: none, or not a key).
func (h *History) PeerHandler(keyOf func(*unstructured.Unstructured) (relayproto.Key, bool)) cache.ResourceEventHandler {
	observe := func(obj any, listed bool) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			k, hasKey := keyOf(u)
			h.observePeer(u.GetName(), peerSeen{uid: u.GetUID(), owner: OwnerOf(u), key: k, hasKey: hasKey}, listed)
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj, false) },
		DeleteFunc: func(obj any) {
			if u, ok := unwrapDeleted(obj).(*unstructured.Unstructured); ok {
				h.forgetPeer(u.GetName())
			}
		},
	}
}

// NodeHandler feeds the history from the Node informer.
func (h *History) NodeHandler() cache.ResourceEventHandler {
	observe := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			h.observeNode(n.Name, n.UID)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if n, ok := unwrapDeleted(obj).(*corev1.Node); ok {
				h.forgetNode(n.Name, n.UID)
			}
		},
	}
}
