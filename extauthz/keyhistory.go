package extauthz

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// Key history (docs/revocation.md#keys). Every agent may
// write every WireKubePeer: node M can write a fresh key into victim V's
// WireKubePeer and then V's old key into its own. Each key is then held by
// one peer, so peer_key_duplicate does not fire, and M's own valid token
// would bind V's key. extauthz therefore remembers which WireKubePeer first
// held each key and refuses the key on any other peer while that one exists
// (peer_key_moved), whether or not an admission policy stops such writes.
//
// What it learns from: the WireKubePeer informer's events, so every replica
// watching the same stream remembers the same first holders once it has
// seen the same history. At start the listed state seeds it: each key's
// current holders (all of them when several hold it) count as its first.
//
// What it cannot know: a move made while no extauthz ran, or before this
// process started (its listed state is taken as the first holding); a move
// of a key beyond the last historyKeysPerPeer keys of its first peer (the
// older ones are forgotten); a move missed in a watch gap that the
// informer's relist only shows as the final state. Bounded: at most
// historyKeysPerPeer keys per existing WireKubePeer; a peer's keys are
// forgotten when it is deleted.

// historyKeysPerPeer bounds the keys remembered per WireKubePeer: its
// current key and its last few before (a rotation back to one of them
// stays admitted as its own key).
const historyKeysPerPeer = 4

// keyHistory remembers the first holders of keys. Safe for concurrent use.
type keyHistory struct {
	// current returns the WireKubePeers now holding key (canonical base64),
	// from the informer's index: a key nobody remembers is seeded from it.
	current func(key string) []string

	mu     sync.Mutex
	byKey  map[relayproto.Key][]string // first holders: one, several only when seeded so
	byPeer map[string]*peerHistory
}

// peerHistory is what is remembered of one existing WireKubePeer.
type peerHistory struct {
	uid  types.UID
	keys []relayproto.Key // keys it first held, most recent last, at most historyKeysPerPeer
}

func newKeyHistory(current func(key string) []string) *keyHistory {
	return &keyHistory{current: current, byKey: map[relayproto.Key][]string{}, byPeer: map[string]*peerHistory{}}
}

// observe records that peer (with uid) holds key. seeding: the peer comes
// from the informer's initial list, so it is a first holder even when
// another peer of that list already is (which one came first is unknown).
func (h *keyHistory) observe(peer string, uid types.UID, key relayproto.Key, hasKey, seeding bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ph := h.byPeer[peer]
	if ph != nil && ph.uid != uid {
		h.forgetLocked(peer) // deleted and recreated under the same name
		ph = nil
	}
	if ph == nil {
		ph = &peerHistory{uid: uid}
		h.byPeer[peer] = ph
	}
	if !hasKey {
		return
	}
	holders := h.byKey[key]
	switch {
	case len(holders) == 0:
		for _, p := range h.current(key.Base64()) {
			if p != peer && h.byPeer[p] != nil {
				h.addLocked(p, key)
			}
		}
		h.addLocked(peer, key)
	case slices.Contains(holders, peer), seeding:
		h.addLocked(peer, key)
	}
	// Otherwise peer took a key another existing peer held first: not
	// remembered as its own (the check refuses it, peer_key_moved).
}

// addLocked makes peer a first holder of key and its most recent key,
// forgetting its oldest beyond historyKeysPerPeer.
func (h *keyHistory) addLocked(peer string, key relayproto.Key) {
	ph := h.byPeer[peer]
	if i := slices.Index(ph.keys, key); i >= 0 {
		ph.keys = slices.Delete(ph.keys, i, i+1)
	} else if !slices.Contains(h.byKey[key], peer) {
		h.byKey[key] = append(h.byKey[key], peer)
	}
	ph.keys = append(ph.keys, key)
	if len(ph.keys) > historyKeysPerPeer {
		h.dropLocked(peer, ph.keys[0])
		ph.keys = slices.Delete(ph.keys, 0, 1)
	}
}

// dropLocked removes peer from the first holders of key.
func (h *keyHistory) dropLocked(peer string, key relayproto.Key) {
	rest := slices.DeleteFunc(h.byKey[key], func(p string) bool { return p == peer })
	if len(rest) == 0 {
		delete(h.byKey, key)
		return
	}
	h.byKey[key] = rest
}

// forget drops a deleted WireKubePeer and every key it first held.
func (h *keyHistory) forget(peer string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forgetLocked(peer)
}

// forgetLocked drops peer; a key it first held is then first held by the
// peers now holding it (a key that reappears after its first peer was
// deleted is admitted on the peer that has it).
func (h *keyHistory) forgetLocked(peer string) {
	ph := h.byPeer[peer]
	if ph == nil {
		return
	}
	delete(h.byPeer, peer)
	for _, key := range ph.keys {
		h.dropLocked(peer, key)
		if len(h.byKey[key]) > 0 {
			continue
		}
		for _, p := range h.current(key.Base64()) {
			if p != peer && h.byPeer[p] != nil {
				h.addLocked(p, key)
			}
		}
	}
}

// firstHolders returns the first holders of key when peer is not one of
// them; nil when peer may hold it (it held it first, or nobody is known).
func (h *keyHistory) firstHolders(peer string, key relayproto.Key) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	holders := h.byKey[key]
	if slices.Contains(holders, peer) {
		return nil
	}
	return slices.Clone(holders)
}

// size is the number of keys remembered
// (wirekube_extauthz_peer_key_history_keys).
func (h *keyHistory) size() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byKey)
}

// handler feeds the history from the WireKubePeer informer.
func (h *keyHistory) handler() cache.ResourceEventHandler {
	observe := func(obj any, seeding bool) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			k, hasKey := peerKeyOf(u)
			h.observe(u.GetName(), u.GetUID(), k, hasKey, seeding)
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				h.forget(u.GetName())
			}
		},
	}
}

// KeyFirstHolder reports the WireKubePeer that first held key, when it is
// not peer and still exists in the cache: peer must not use the key.
func (in *Informers) KeyFirstHolder(peer string, key relayproto.Key) (string, bool) {
	if in.history == nil {
		return "", false
	}
	for _, p := range in.history.firstHolders(peer, key) {
		if _, ok := in.PeerRef(p); ok {
			return p, true
		}
	}
	return "", false
}

// KeyHistorySize is the number of keys whose first holders are remembered.
func (in *Informers) KeyHistorySize() int {
	if in.history == nil {
		return 0
	}
	return in.history.size()
}

// keyFirstHolders is the part of Objects the key history answers
// (Informers); Objects without it refuse nothing as moved.
type keyFirstHolders interface {
	KeyFirstHolder(peer string, key relayproto.Key) (string, bool)
}

// keyMoved refuses key on peer when another, still existing WireKubePeer
// held it first (peer_key_moved): the Decision names both peers, so that the
// Event is written on each.
func (a *Authorizer) keyMoved(peer string, key relayproto.Key) (Decision, bool) {
	h, ok := a.objects.(keyFirstHolders)
	if !ok {
		return Decision{}, false
	}
	first, moved := h.KeyFirstHolder(peer, key)
	if !moved {
		return Decision{}, false
	}
	return Decision{Reason: contract.ReasonPeerKeyMoved, Peer: peer, KeyFingerprint: key.Fingerprint(),
		Detail: "key first held by WireKubePeer " + first, firstHolder: first}, true
}

// registerKeyHistoryMetric registers wirekube_extauthz_peer_key_history_keys,
// read from size at scrape time.
func registerKeyHistoryMetric(reg prometheus.Registerer, size func() int) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "peer_key_history_keys",
		Help: "Public keys whose first WireKubePeer extauthz remembers (at most 4 per existing WireKubePeer; peer_key_moved).",
	}, func() float64 { return float64(size()) }))
}
