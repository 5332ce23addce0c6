package extauthz

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

// historySim drives a keyHistory as the informer would: peers maps each
// existing WireKubePeer to its key, uids to its UID.
type historySim struct {
	h     *keyHistory
	peers map[string]relayproto.Key
	uids  map[string]types.UID
}

func newHistorySim() *historySim {
	s := &historySim{peers: map[string]relayproto.Key{}, uids: map[string]types.UID{}}
	s.h = newKeyHistory(func(key string) []string {
		var out []string
		for p, k := range s.peers {
			if k.Base64() == key {
				out = append(out, p)
			}
		}
		slices.Sort(out)
		return out
	})
	return s
}

func simKey(b byte) relayproto.Key {
	var k relayproto.Key
	k[0], k[31] = b, 1
	return k
}

// set writes key into peer (created with uid "uid-<peer>" if new); seed: as
// an item of the informer's initial list.
func (s *historySim) set(peer string, key byte, seed bool) {
	if _, ok := s.uids[peer]; !ok {
		s.uids[peer] = types.UID("uid-" + peer)
	}
	s.peers[peer] = simKey(key)
	s.h.observe(peer, s.uids[peer], simKey(key), true, seed)
}

func (s *historySim) del(peer string) {
	delete(s.peers, peer)
	delete(s.uids, peer)
	s.h.forget(peer)
}

// refused is what KeyFirstHolder answers: a first holder other than peer
// that still exists.
func (s *historySim) refused(peer string) string {
	for _, p := range s.h.firstHolders(peer, s.peers[peer]) {
		if _, ok := s.peers[p]; ok {
			return p
		}
	}
	return ""
}

// TestKeyHistory: which holder of a key is refused after each history. V, M
// and N are WireKubePeers; keys are numbers.
func TestKeyHistory(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(s *historySim)
		want map[string]string // peer -> first holder it is refused for ("" admitted)
		size int               // keys remembered
	}{
		{"key moved from V to M: M refused", func(s *historySim) {
			s.set("V", 1, true)
			s.set("M", 2, true)
			s.set("V", 3, false) // M writes a fresh key into V
			s.set("M", 1, false) // then V's old key into its own
		}, map[string]string{"M": "V", "V": ""}, 3},
		{"V's own rotation and return to its first key: admitted", func(s *historySim) {
			s.set("V", 1, true)
			s.set("V", 2, false)
			s.set("V", 1, false)
		}, map[string]string{"V": ""}, 2},
		{"first holder deleted: the key's holder admitted, then a copier refused", func(s *historySim) {
			s.set("V", 1, true)
			s.set("M", 2, true)
			s.set("V", 3, false)
			s.set("M", 1, false)
			s.del("V")
			s.set("N", 1, false)
		}, map[string]string{"M": "", "N": "M"}, 2},
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
		}, map[string]string{"M": "V"}, 4},
		{"listed twice at start: both first holders", func(s *historySim) {
			s.set("V", 1, true)
			s.set("M", 1, true)
			s.set("V", 2, false)
		}, map[string]string{"M": "", "V": ""}, 2},
		{"listed at start, then a copier after sync: refused", func(s *historySim) {
			s.set("V", 1, true)
			s.set("M", 1, false)
		}, map[string]string{"M": "V"}, 1},
		{"V recreated under the same name with another key: its old keys forgotten", func(s *historySim) {
			s.set("V", 1, true)
			s.uids["V"] = "uid-V-2"
			s.set("V", 2, false)
			s.set("M", 1, false)
		}, map[string]string{"M": "", "V": ""}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newHistorySim()
			tc.run(s)
			for peer, want := range tc.want {
				if got := s.refused(peer); got != want {
					t.Errorf("%s refused for first holder %q, want %q", peer, got, want)
				}
			}
			if got := s.h.size(); got != tc.size {
				t.Errorf("keys remembered %d, want %d", got, tc.size)
			}
		})
	}
}

// TestKeyHistoryBounded: one WireKubePeer rotating 1,000 times is
// remembered with its last 4 keys; deleting it forgets them.
func TestKeyHistoryBounded(t *testing.T) {
	s := newHistorySim()
	for i := range 1000 {
		s.set("V", byte(i%251), false)
	}
	if got := s.h.size(); got != historyKeysPerPeer {
		t.Fatalf("keys remembered %d after 1,000 rotations, want %d", got, historyKeysPerPeer)
	}
	s.del("V")
	if got := s.h.size(); got != 0 || len(s.h.byPeer) != 0 {
		t.Fatalf("keys %d, peers %d after the delete, want 0, 0", got, len(s.h.byPeer))
	}
}

var freshKeyB64 = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, 32))

// moveKey plays the attack on the fixtures: node-a's agent (M) writes a
// fresh key into node-b's WireKubePeer (V), then node-b's old key into
// node-a's, and waits until the informer and the key history saw both.
func moveKey(t *testing.T, env *env) {
	t.Helper()
	testutil.Eventually(t, "the listed keys in the history", func() bool { return env.in.KeyHistorySize() == 3 })
	peers := env.dyn.Resource(PeerGVR)
	_, err := peers.Update(t.Context(), peerObject("node-b", freshKeyB64), metav1.UpdateOptions{})
	must(t, err)
	testutil.Eventually(t, "node-b's fresh key in the history", func() bool { return env.in.KeyHistorySize() == 4 })
	_, err = peers.Update(t.Context(), peerObject("node-a", peerKeyBB64), metav1.UpdateOptions{})
	must(t, err)
	testutil.Eventually(t, "node-a holding node-b's old key", func() bool {
		k, _ := env.in.PeerKey("node-a")
		return k == peerKeyBB64
	})
}

// TestKeyMovedRefusedAtCheck goes through a check: after the move, node-a's
// agent is refused 403 peer_key_moved (no peer_key_duplicate: each key has
// one holder), with a Warning Event on both WireKubePeers; once node-b is
// deleted the key is node-a's and the agent is admitted.
func TestKeyMovedRefusedAtCheck(t *testing.T) {
	env := newEnv(t, nil)
	e := newEventsEnv(t, env.in)
	env.authz.events = e.ev
	moveKey(t, env)
	tok := env.tokens()["agent-pod"]
	resp, err := env.srv.Check(context.Background(), relayCheck(tok, nil))
	must(t, err)
	assertDenied(t, resp, contract.ReasonPeerKeyMoved)
	e.drain(t)
	got := map[string]string{}
	for _, ev := range e.events(t) {
		got[ev.InvolvedObject.Name] = ev.Reason + " " + ev.Type
	}
	if len(got) != 2 || got["node-a"] != "peer_key_moved Warning" || got["node-b"] != "peer_key_moved Warning" {
		t.Fatalf("Events %v, want a Warning peer_key_moved on node-a and on node-b", got)
	}
	must(t, env.dyn.Resource(PeerGVR).Delete(t.Context(), "node-b", metav1.DeleteOptions{}))
	testutil.Eventually(t, "node-b forgotten, its old key node-a's", func() bool {
		_, ok := env.in.PeerRef("node-b")
		return !ok && env.in.KeyHistorySize() == 3
	})
	resp, err = env.srv.Check(context.Background(), relayCheck(tok, nil))
	must(t, err)
	if resp.GetDeniedResponse() != nil {
		t.Fatalf("denied after node-b was deleted: %v", resp.GetDeniedResponse().GetHeaders())
	}
}

// TestKeyMovedRevokesLiveSession goes through the hub: a live session of
// node-a's agent bound to the moved key (admitted by a replica that did
// not see the move) is revoked with peer_key_moved as soon as its binding
// reaches this extauthz.
func TestKeyMovedRevokesLiveSession(t *testing.T) {
	env := newEnv(t, nil)
	moveKey(t, env)
	hub, err := NewRevocationHub(env.authz, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	must(t, err)
	st := newRevocationStream()
	moved := bindingOf(&review{username: "system:serviceaccount:wirekube-system:wirekube-agent", uid: agentSAUID,
		podName: "agent-a", podUID: podAUID, nodeName: "node-a", nodeUID: nodeAUID}, "node-a", "node-a", fixtureKeyB)
	st.pending = append(st.pending, revocation.Op{Kind: revocation.KindAdd, ID: 7, Binding: moved.Format()})
	out := hub.judge(st)
	want := fmt.Sprintf("%v", []revocation.Op{{Kind: revocation.KindRevoke, ID: 7, Reason: string(contract.ReasonPeerKeyMoved)}})
	if fmt.Sprintf("%v", out) != want {
		t.Fatalf("ops %v, want %s", out, want)
	}
	if st.size() != 0 {
		t.Fatalf("%d bindings still watched, want 0", st.size())
	}
}

// TestKeyHistoryDeleteAsTombstone: V's delete reaches the history only as
// a tombstone (the informer missed the delete and found V gone at a
// relist). V is forgotten all the same: M, taking the key then, holds it
// first, and N copying it from M is refused for M.
func TestKeyHistoryDeleteAsTombstone(t *testing.T) {
	s := newHistorySim()
	hd := s.h.handler()
	v := peerObject("V", simKey(1).Base64())
	s.peers["V"] = simKey(1)
	hd.OnAdd(v, true)
	delete(s.peers, "V")
	hd.OnDelete(cache.DeletedFinalStateUnknown{Key: "V", Obj: v})
	s.set("M", 1, false)
	s.set("N", 1, false)
	if got := s.refused("N"); got != "M" {
		t.Errorf("N refused for first holder %q, want %q", got, "M")
	}
}
