package extauthz

import (
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/wirekube/relay-ws/extauthz/internal/kubewatch"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// ownerOf is the owner of WireKubePeer u (keyhistory.go): the Node its
// ownerReference names when that Node has the peer's own name (what
// WireKube's agent sets, pkg/agent/agent.go nodeOwnerReferences), else
// the peer itself. A reference to a Node of another name is no evidence:
// with the admission policy an agent may still set any reference on its
// own peer.
func ownerOf(u *unstructured.Unstructured) keyOwner {
	for _, r := range u.GetOwnerReferences() {
		if r.APIVersion == "v1" && r.Kind == "Node" && r.Name == u.GetName() && r.UID != "" {
			return keyOwner{node: true, name: r.Name}
		}
	}
	return keyOwner{name: u.GetName(), uid: u.GetUID()}
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

// peerHandler feeds the history from the WireKubePeer informer.
func (h *keyHistory) peerHandler() cache.ResourceEventHandler {
	observe := func(obj any, listed bool) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			k, hasKey := peerKeyOf(u)
			h.observePeer(u.GetName(), peerSeen{uid: u.GetUID(), owner: ownerOf(u), key: k, hasKey: hasKey}, listed)
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

// nodeHandler feeds the history from the Node informer.
func (h *keyHistory) nodeHandler() cache.ResourceEventHandler {
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

// KeyOwner reports the owner of key that forbids it to WireKubePeer peer
// (keyhistory.go): a Node or WireKubePeer other than the owner of peer's
// cached object that published key first and still exists. The owner is
// read from the cache, not from the history, so a peer created a moment
// ago is judged as its own owner before the history has seen it.
func (in *Informers) KeyOwner(peer string, key relayproto.Key) (keyOwner, bool) {
	u, ok := kubewatch.Get[*unstructured.Unstructured](in.peers, peer)
	if in.history == nil || !ok {
		return keyOwner{}, false
	}
	return in.history.refusal(ownerOf(u), key)
}

// KeyHistorySize is the number of keys whose owners are remembered.
func (in *Informers) KeyHistorySize() int {
	if in.history == nil {
		return 0
	}
	return in.history.size()
}

// keyOwners is the part of Objects the key history answers (Informers);
// Objects without it refuse nothing as moved.
type keyOwners interface {
	KeyOwner(peer string, key relayproto.Key) (keyOwner, bool)
}

// keyMoved refuses key on peer when another owner, still existing,
// published it first (peer_key_moved): the Decision names the owner, so
// that its WireKubePeer (or, while that is gone, its Node) gets an Event
// too.
func (a *Authorizer) keyMoved(peer string, key relayproto.Key) (Decision, bool) {
	h, ok := a.objects.(keyOwners)
	if !ok {
		return Decision{}, false
	}
	owner, moved := h.KeyOwner(peer, key)
	if !moved {
		return Decision{}, false
	}
	return Decision{Reason: contract.ReasonPeerKeyMoved, Peer: peer, KeyFingerprint: key.Fingerprint(),
		Detail: "key first published by " + owner.String(), firstHolder: owner.name}, true
}

// registerKeyHistoryMetric registers wirekube_extauthz_peer_key_history_keys,
// read from size at scrape time.
func registerKeyHistoryMetric(reg prometheus.Registerer, size func() int) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "peer_key_history_keys",
		Help: "Public keys whose owner (the Node or WireKubePeer that published them first) extauthz remembers " +
			"(at most 4 per owner; peer_key_moved).",
	}, func() float64 { return float64(size()) }))
}
