package extauthz

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"github.com/wirekube/relay-ws/extauthz/internal/binding"
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

// simKey is a key whose first byte is b (the key history's tests use the
// same).
func simKey(b byte) relayproto.Key {
	var k relayproto.Key
	k[0], k[31] = b, 1
	return k
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
	env.authz.events = peerEvents{e.ev}
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
		return !ok && env.in.KeyHistorySize() == 2
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
	hub, err := newHub(env, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	must(t, err)
	st := revocationhub.NewStream()
	moved := binding.Of(&binding.Subject{Username: "system:serviceaccount:wirekube-system:wirekube-agent", UID: agentSAUID,
		PodName: "agent-a", PodUID: podAUID, NodeName: "node-a", NodeUID: nodeAUID}, "node-a", "node-a", fixtureKeyB)
	st.Queue(revocation.Op{Kind: revocation.KindAdd, ID: 7, Binding: moved.Format()})
	out := hub.Judge(st)
	want := fmt.Sprintf("%v", []revocation.Op{{Kind: revocation.KindRevoke, ID: 7, Reason: string(contract.ReasonPeerKeyMoved)}})
	if fmt.Sprintf("%v", out) != want {
		t.Fatalf("ops %v, want %s", out, want)
	}
	if st.Size() != 0 {
		t.Fatalf("%d bindings still watched, want 0", st.Size())
	}
}

// TestSlimPeerKeepsNodeOwners: the informer's transform keeps a
// WireKubePeer's Node owner references (the key history's evidence) and
// drops every other owner reference.
func TestSlimPeerKeepsNodeOwners(t *testing.T) {
	u := peerObject("V", simKey(1).Base64())
	u.SetOwnerReferences([]metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "uid-rs"},
		{APIVersion: "v1", Kind: "Node", Name: "V", UID: "uid-node-V", Controller: new(bool)},
	})
	out, err := slimObject(u)
	must(t, err)
	got := out.(*unstructured.Unstructured).GetOwnerReferences()
	want := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "V", UID: "uid-node-V"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("owner references after the transform %+v, want %+v", got, want)
	}
}
