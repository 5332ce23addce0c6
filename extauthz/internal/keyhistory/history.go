// Package keyhistory remembers who published each key first
// (docs/revocation.md#moved-keys). Every agent may write every WireKubePeer: node M can write a fresh key into victim V's WireKubePeer and
// then V's old key into its own, or wait until V's WireKubePeer is deleted
// and re-created (an operator's delete, an agent reinstall, a Node
// re-registered) and write V's key into its own peer in that gap. extauthz
// therefore remembers who published each key first and refuses the key on a
// WireKubePeer of any other owner while that owner still exists
// (peer_key_moved), whether or not an admission policy stops such writes.
//
// The owner of a WireKubePeer is the Node it names as owner (an
// ownerReference v1 Node whose name is the peer's own: WireKube's agent
// names its peer after its node and sets that reference), else the
// WireKubePeer itself (name and UID). A key is published by the WireKubePeer
// whose key becomes it while no other peer holds it and no owner is
// remembered for it (or, at start, by every peer the list shows holding it).
// Holding a key never makes an owner: a peer that takes a key somebody
// published is not remembered, so the sole holder of a key is refused only
// for an owner that published it and still exists, never for another peer
// that once held it.
//
// How long an owner lasts: a WireKubePeer owner until that peer is deleted;
// a Node owner while a Node of its name exists and, after its deletion,
// while it is among the last retiredNodesMax Nodes deleted. So a Node-owned
// key outlives its WireKubePeer: the peer re-created by the same node (same
// name: a re-registered Node gets a new UID, its key stays on its disk) is
// admitted with it, and a peer of another node that takes it meanwhile is
// refused.
//
// What it learns from: the WireKubePeer and Node informers' events, in the
// order they arrive; it reads no cache, so replicas fed the same events in
// the same order decide alike. Bounded: at most historyKeysPerOwner keys per
// owner; owners are existing WireKubePeers, existing Nodes and at most
// retiredNodesMax deleted Nodes.
package keyhistory

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/wirekube/relay-ws/relayproto"
)

// historyKeysPerOwner bounds the keys remembered per owner: its current key
// and its last few before (a rotation back to one of them stays admitted as
// its own key).
const historyKeysPerOwner = 4

// retiredNodesMax bounds the deleted Nodes whose keys stay owned (a Node
// re-registering under its name, a scale-down's worth of Nodes).
const retiredNodesMax = 256

// Owner is who published a key: a Node by name, or a WireKubePeer by
// name and UID.
type Owner struct {
	node bool
	name string
	uid  types.UID // the WireKubePeer's; empty for a Node
}

// Name is the Node's or the WireKubePeer's name.
func (o Owner) Name() string { return o.name }

// String names the owner for a log line or a Decision's detail.
func (o Owner) String() string {
	if o.node {
		return "Node " + o.name
	}
	return "WireKubePeer " + o.name
}

// peerSeen is an existing WireKubePeer as its last event showed it.
type peerSeen struct {
	uid    types.UID
	owner  Owner
	key    relayproto.Key
	hasKey bool
}

// History remembers the owners of keys. Safe for concurrent use.
type History struct {
	mu      sync.Mutex
	byKey   map[relayproto.Key][]Owner // several only when listed so at start
	byOwner map[Owner][]relayproto.Key // most recent last, at most historyKeysPerOwner
	peers   map[string]peerSeen
	holders map[relayproto.Key][]string // the existing peers holding each key
	nodes   map[string]types.UID        // existing Nodes
	retired []string                    // deleted Nodes, oldest first, at most retiredMax
	// retiredMax is retiredNodesMax (a test lowers it).
	retiredMax int
}

// New is an empty history.
func New() *History {
	return &History{byKey: map[relayproto.Key][]Owner{}, byOwner: map[Owner][]relayproto.Key{},
		peers: map[string]peerSeen{}, holders: map[relayproto.Key][]string{}, nodes: map[string]types.UID{},
		retiredMax: retiredNodesMax}
}

// observePeer records WireKubePeer name as an event shows it. listed: the
// event is of the informer's initial list, so the peer is an owner of its
// key even when others hold it too (which came first is unknown).
func (h *History) observePeer(name string, p peerSeen, listed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old, existed := h.peers[name]
	if existed && old.uid != p.uid {
		h.dropPeerLocked(name) // deleted and re-created under the same name
		existed = false
	}
	if existed {
		h.unholdLocked(name, old)
	}
	h.peers[name] = p
	if !p.hasKey {
		return
	}
	h.holders[p.key] = append(h.holders[p.key], name)
	published := !existed || !old.hasKey || old.key != p.key
	owners := h.byKey[p.key]
	switch {
	case slices.Contains(owners, p.owner), listed:
		h.addLocked(p.owner, p.key)
	case published && len(owners) == 0 && len(h.holders[p.key]) == 1:
		h.addLocked(p.owner, p.key)
	}
	// Otherwise the peer took a key it did not publish: it is not an
	// owner (refused while an owner exists, peer_key_moved).
}

// unholdLocked removes name from the holders of its previous key.
func (h *History) unholdLocked(name string, old peerSeen) {
	if !old.hasKey {
		return
	}
	rest := slices.DeleteFunc(h.holders[old.key], func(p string) bool { return p == name })
	if len(rest) == 0 {
		delete(h.holders, old.key)
		return
	}
	h.holders[old.key] = rest
}

// addLocked makes o an owner of key, its most recent, forgetting its oldest
// beyond historyKeysPerOwner.
func (h *History) addLocked(o Owner, key relayproto.Key) {
	keys := h.byOwner[o]
	if i := slices.Index(keys, key); i >= 0 {
		keys = slices.Delete(keys, i, i+1)
	} else {
		h.byKey[key] = append(h.byKey[key], o)
	}
	keys = append(keys, key)
	if len(keys) > historyKeysPerOwner {
		h.unownLocked(o, keys[0])
		keys = slices.Delete(keys, 0, 1)
	}
	h.byOwner[o] = keys
}

// unownLocked removes o from the owners of key.
func (h *History) unownLocked(o Owner, key relayproto.Key) {
	rest := slices.DeleteFunc(h.byKey[key], func(x Owner) bool { return x == o })
	if len(rest) == 0 {
		delete(h.byKey, key)
		return
	}
	h.byKey[key] = rest
}

// forgetOwnerLocked drops every key o owns.
func (h *History) forgetOwnerLocked(o Owner) {
	for _, key := range h.byOwner[o] {
		h.unownLocked(o, key)
	}
	delete(h.byOwner, o)
}

// forgetPeer records the deletion of WireKubePeer name.
func (h *History) forgetPeer(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropPeerLocked(name)
}

// dropPeerLocked drops peer name. Its keys go with it when it is their
// owner; a Node owner keeps them while it lasts (liveLocked).
func (h *History) dropPeerLocked(name string) {
	p, ok := h.peers[name]
	if !ok {
		return
	}
	delete(h.peers, name)
	h.unholdLocked(name, p)
	if !h.liveLocked(p.owner) {
		h.forgetOwnerLocked(p.owner)
	}
}

// observeNode records that Node name exists with uid.
func (h *History) observeNode(name string, uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nodes[name] = uid
	h.retired = slices.DeleteFunc(h.retired, func(n string) bool { return n == name })
}

// forgetNode records the deletion of Node name (uid): its keys stay owned
// while it is among the last retiredNodesMax Nodes deleted.
func (h *History) forgetNode(name string, uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if got, ok := h.nodes[name]; !ok || (uid != "" && got != uid) {
		return // a delete of an older Node of that name
	}
	delete(h.nodes, name)
	h.retired = append(h.retired, name)
	if len(h.retired) > h.retiredMax {
		h.forgetOwnerLocked(Owner{node: true, name: h.retired[0]})
		h.retired = slices.Delete(h.retired, 0, 1)
	}
}

// liveLocked reports whether o still exists: its WireKubePeer (same UID),
// or its Node, existing or among the recently deleted.
func (h *History) liveLocked(o Owner) bool {
	if !o.node {
		p, ok := h.peers[o.name]
		return ok && p.uid == o.uid
	}
	_, ok := h.nodes[o.name]
	return ok || slices.Contains(h.retired, o.name)
}

// Refusal returns an owner of key other than owner (the owner of the
// WireKubePeer asking, ownerOf its cached object) that still exists: that
// peer must not use key. False when it may (owner is an owner of key, or no
// owner of key exists).
func (h *History) Refusal(owner Owner, key relayproto.Key) (Owner, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	owners := h.byKey[key]
	if slices.Contains(owners, owner) {
		return Owner{}, false
	}
	for _, o := range owners {
		if h.liveLocked(o) {
			return o, true
		}
	}
	return Owner{}, false
}

// Size is the number of keys with an owner remembered
// (wirekube_extauthz_peer_key_history_keys).
func (h *History) Size() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byKey)
}
