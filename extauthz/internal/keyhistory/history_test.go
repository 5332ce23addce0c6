package keyhistory

import (
	"encoding/base64"
	"fmt"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/wirekube/relay-ws/relayproto"
)

// historySim drives a keyHistory as the informers would. Peers are named
// after their node; an agent peer is owned by its Node (as WireKube's agent
// sets it), another by itself. Each creation of a peer gets a new UID.
type historySim struct {
	h      *History
	gen    map[string]int // creations of each peer name, for its UID
	keys   map[string]relayproto.Key
	owners map[string]Owner
}

func newHistorySim() *historySim {
	return &historySim{h: New(), gen: map[string]int{}, keys: map[string]relayproto.Key{}, owners: map[string]Owner{}}
}

func simKey(b byte) relayproto.Key {
	var k relayproto.Key
	k[0], k[31] = b, 1
	return k
}

func (s *historySim) uid(peer string) types.UID {
	return types.UID(fmt.Sprintf("uid-%s-%d", peer, s.gen[peer]))
}

// write writes key into peer, created if new, owned by its Node or by
// itself. listed: as an item of the informer's initial list.
func (s *historySim) write(peer string, key byte, nodeOwned, listed bool) {
	if _, ok := s.keys[peer]; !ok {
		s.gen[peer]++
	}
	s.keys[peer] = simKey(key)
	owner := Owner{name: peer, uid: s.uid(peer)}
	if nodeOwned {
		owner = Owner{node: true, name: peer}
	}
	s.owners[peer] = owner
	s.h.observePeer(peer, peerSeen{uid: s.uid(peer), owner: owner, key: simKey(key), hasKey: true}, listed)
}

func (s *historySim) set(peer string, key byte, listed bool)   { s.write(peer, key, false, listed) }
func (s *historySim) agent(peer string, key byte, listed bool) { s.write(peer, key, true, listed) }

func (s *historySim) del(peer string) {
	delete(s.keys, peer)
	s.h.forgetPeer(peer)
}

func (s *historySim) node(name string)    { s.h.observeNode(name, types.UID("uid-node-"+name)) }
func (s *historySim) delNode(name string) { s.h.forgetNode(name, types.UID("uid-node-"+name)) }

// agentsOnNodes lists Nodes V and M at start, each with its agent peer
// holding key 1 (V) and 2 (M).
func (s *historySim) agentsOnNodes() {
	s.node("V")
	s.node("M")
	s.agent("V", 1, true)
	s.agent("M", 2, true)
}

// takeKeyInGap: after agentsOnNodes, V's peer is deleted (Node V stays)
// and M writes V's key 1 into its own peer in that gap.
func (s *historySim) takeKeyInGap() {
	s.agentsOnNodes()
	s.del("V")
	s.agent("M", 1, false)
}

// refused is the owner peer's key is refused for ("" admitted).
func (s *historySim) refused(peer string) string {
	o, ok := s.h.Refusal(s.owners[peer], s.keys[peer])
	if !ok {
		return ""
	}
	return o.String()
}

// TestKeyHistory: which holder of a key is refused after each history, and
// for which owner. V, M and N are WireKubePeers named after their nodes;
// "set" peers own themselves, "agent" peers are owned by their Node, as
// WireKube's agent creates them; keys are numbers.
func TestKeyHistory(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(s *historySim)
		want map[string]string // peer -> owner it is refused for ("" admitted)
		size int               // keys remembered
	}{
		{"key moved from V to M: M refused", func(s *historySim) {
			s.set("V", 1, true)
			s.set("M", 2, true)
			s.set("V", 3, false) // M writes a fresh key into V
			s.set("M", 1, false) // then V's old key into its own
		}, map[string]string{"M": "WireKubePeer V", "V": ""}, 3},
		{"V's own rotation and return to its first key: admitted", func(s *historySim) {
			s.set("V", 1, true)
			s.set("V", 2, false)
			s.set("V", 1, false)
		}, map[string]string{"V": ""}, 2},
		{"owner WireKubePeer deleted: the key's holder admitted, but not its owner", func(s *historySim) {
			s.set("V", 1, true)
			s.set("M", 2, true)
			s.set("V", 3, false)
			s.set("M", 1, false)
			s.del("V")
			s.set("N", 1, false)
		}, map[string]string{"M": "", "N": ""}, 1},
		{"key beyond V's last 4 forgotten: M admitted (the bound)", func(s *historySim) {
			s.set("V", 1, true)
			for k := byte(2); k <= 5; k++ {
				s.set("V", k, false)
			}
			s.set("M", 1, false)
		}, map[string]string{"M": "", "V": ""}, 5},
		{"key within V's last 4: M refused", func(s *historySim) {
			s.set("V", 1, true)
			for k := byte(2); k <= 4; k++ {
				s.set("V", k, false)
			}
			s.set("M", 1, false)
		}, map[string]string{"M": "WireKubePeer V"}, 4},
		{"listed twice at start: both owners", func(s *historySim) {
			s.set("V", 1, true)
			s.set("M", 1, true)
			s.set("V", 2, false)
		}, map[string]string{"M": "", "V": ""}, 2},
		{"listed at start, then a copier after sync: refused", func(s *historySim) {
			s.set("V", 1, true)
			s.set("M", 1, false)
		}, map[string]string{"M": "WireKubePeer V"}, 1},
		{"V recreated under the same name with another key: its old keys forgotten", func(s *historySim) {
			s.set("V", 1, true)
			s.gen["V"]++ // the informer saw no delete, only the new UID
			s.set("V", 2, false)
			s.set("M", 1, false)
		}, map[string]string{"M": "", "V": ""}, 2},
		{"agent V's peer deleted, Node V stays: M taking its key in the gap refused", func(s *historySim) {
			s.takeKeyInGap()
		}, map[string]string{"M": "Node V"}, 2},
		{"the gap, M gives the key back, V re-created with it: V admitted, M again refused", func(s *historySim) {
			s.takeKeyInGap()
			s.agent("M", 3, false)
			s.agent("V", 1, false)
			s.agent("M", 1, false)
		}, map[string]string{"V": "", "M": "Node V"}, 3},
		{"V re-created while M still holds its key: V its owner, M refused", func(s *historySim) {
			s.takeKeyInGap()
			s.agent("V", 1, false)
		}, map[string]string{"V": "", "M": "Node V"}, 2},
		{"Node V re-registered in the gap (deleted, created again): its key still its own", func(s *historySim) {
			s.agentsOnNodes()
			s.delNode("V")
			s.del("V")
			s.agent("M", 1, false)
			s.agent("M", 3, false)
			s.node("V")
			s.agent("V", 1, false)
		}, map[string]string{"V": ""}, 3},
		{"agent V without its Node: its keys go with its peer", func(s *historySim) {
			s.agent("V", 1, true)
			s.del("V")
			s.agent("M", 1, false)
			s.agent("N", 1, false)
		}, map[string]string{"M": "", "N": ""}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newHistorySim()
			tc.run(s)
			for peer, want := range tc.want {
				if got := s.refused(peer); got != want {
					t.Errorf("%s refused for owner %q, want %q", peer, got, want)
				}
			}
			if got := s.h.Size(); got != tc.size {
				t.Errorf("keys remembered %d, want %d", got, tc.size)
			}
		})
	}
}

// TestKeyHistoryBounded: one owner rotating 1,000 times is remembered with
// its last 4 keys; deleting its WireKubePeer forgets them.
func TestKeyHistoryBounded(t *testing.T) {
	s := newHistorySim()
	for i := range 1000 {
		s.set("V", byte(i%251), false)
	}
	if got := s.h.Size(); got != historyKeysPerOwner {
		t.Fatalf("keys remembered %d after 1,000 rotations, want %d", got, historyKeysPerOwner)
	}
	s.del("V")
	if got := s.h.Size(); got != 0 || len(s.h.byOwner) != 0 || len(s.h.peers) != 0 || len(s.h.holders) != 0 {
		t.Fatalf("keys %d, owners %d, peers %d, held keys %d after the delete, want 0 each",
			got, len(s.h.byOwner), len(s.h.peers), len(s.h.holders))
	}
}

// TestKeyHistoryRetiredNodesBounded: 300 agent peers and their Nodes
// deleted; the keys of the last 256 Nodes stay owned, the 44 before are
// forgotten.
func TestKeyHistoryRetiredNodesBounded(t *testing.T) {
	s := newHistorySim()
	for i := range 300 {
		name := fmt.Sprint("n", i)
		s.node(name)
		s.h.observePeer(name, peerSeen{uid: "u", owner: Owner{node: true, name: name},
			key: relayproto.Key{byte(i), byte(i >> 8), 1}, hasKey: true}, true)
		s.delNode(name)
		s.del(name)
	}
	if got := s.h.Size(); got != 256 {
		t.Fatalf("keys remembered %d after 300 Nodes deleted, want 256", got)
	}
}

// agentPeerObject is WireKubePeer name with key b as WireKube's agent
// creates it: owned by Node owner (nodeOwnerReferences; owner is the peer's
// own name unless a test says otherwise).
func agentPeerObject(name string, b byte, owner string) *unstructured.Unstructured {
	u := peerObject(name, simKey(b).Base64())
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: owner, UID: types.UID("uid-node-" + owner)}})
	return u
}

func nodeObject(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-node-" + name)}}
}

// TestKeyHistoryFromInformerEvents feeds the history through its informer
// handlers: which owner the objects give, and deletes that arrive only as
// tombstones (the informer missed the delete and found the object gone at
// a relist). retired: the deleted Nodes kept, 1 here.
func TestKeyHistoryFromInformerEvents(t *testing.T) {
	gone := func(obj any) cache.DeletedFinalStateUnknown {
		return cache.DeletedFinalStateUnknown{Key: "x", Obj: obj}
	}
	for _, tc := range []struct {
		name string
		run  func(peers, nodes cache.ResourceEventHandler)
		peer string // whose key 1 is checked
		want string // the owner it is refused for ("" admitted)
	}{
		{"an owner reference to the peer's own Node: the Node owns the key beyond its peer", func(peers, nodes cache.ResourceEventHandler) {
			nodes.OnAdd(nodeObject("V"), true)
			peers.OnAdd(agentPeerObject("V", 1, "V"), true)
			peers.OnDelete(agentPeerObject("V", 1, "V"))
			peers.OnAdd(agentPeerObject("M", 1, "M"), false)
		}, "M", "Node V"},
		{"an owner reference to a Node of another name is no evidence", func(peers, nodes cache.ResourceEventHandler) {
			nodes.OnAdd(nodeObject("V"), true)
			peers.OnAdd(agentPeerObject("V", 1, "V"), true)
			peers.OnDelete(agentPeerObject("V", 1, "V"))
			peers.OnAdd(agentPeerObject("M", 1, "V"), false)
		}, "M", "Node V"},
		{"a WireKubePeer deleted as a tombstone is forgotten: M publishes its key, N copying it refused", func(peers, nodes cache.ResourceEventHandler) {
			peers.OnAdd(peerObject("V", simKey(1).Base64()), true)
			peers.OnDelete(gone(peerObject("V", simKey(1).Base64())))
			peers.OnAdd(peerObject("M", simKey(1).Base64()), false)
			peers.OnAdd(peerObject("N", simKey(1).Base64()), false)
		}, "N", "WireKubePeer M"},
		{"a Node deleted as a tombstone is retired: pushed out by the next, its keys go", func(peers, nodes cache.ResourceEventHandler) {
			for _, n := range []string{"V", "X", "M"} {
				nodes.OnAdd(nodeObject(n), true)
			}
			peers.OnAdd(agentPeerObject("V", 1, "V"), true)
			nodes.OnDelete(gone(nodeObject("V")))
			nodes.OnDelete(nodeObject("X"))
			peers.OnDelete(agentPeerObject("V", 1, "V"))
			peers.OnAdd(agentPeerObject("M", 1, "M"), false)
			peers.OnAdd(peerObject("N", simKey(1).Base64()), false)
		}, "N", "Node M"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := New()
			h.retiredMax = 1
			tc.run(h.PeerHandler(keyOf), h.NodeHandler())
			got := ""
			if o, ok := h.Refusal(h.peers[tc.peer].owner, simKey(1)); ok {
				got = o.String()
			}
			if got != tc.want {
				t.Errorf("%s's key refused for owner %q, want %q", tc.peer, got, tc.want)
			}
		})
	}
}

// peerObject is a WireKubePeer of name with spec.publicKey key (base64).
func peerObject(name, key string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "wirekube.io/v1alpha1", "kind": "WireKubePeer",
		"metadata": map[string]any{"name": name, "uid": "uid-peer-" + name},
		"spec":     map[string]any{"publicKey": key},
	}}
}

// keyOf reads spec.publicKey as the informers of extauthz do: base64 of 32
// bytes, else no key.
func keyOf(u *unstructured.Unstructured) (relayproto.Key, bool) {
	raw, _, _ := unstructured.NestedString(u.Object, "spec", "publicKey")
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(b) != len(relayproto.Key{}) {
		return relayproto.Key{}, false
	}
	return relayproto.Key(b), true
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
