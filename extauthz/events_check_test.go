package extauthz

import (
	"context"
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/wirekube/relay-ws/extauthz/internal/events"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// eventsEnv is the Events room over a fake clientset, for the tests that
// reach it through a check or the hub (the room's own tests are in
// internal/events).
type eventsEnv struct {
	ev     *events.Recorder
	client *fake.Clientset
	clock  *clocktesting.FakeClock
}

func newEventsEnv(t *testing.T, objects events.Objects) *eventsEnv {
	t.Helper()
	e := &eventsEnv{client: fake.NewClientset(), clock: clocktesting.NewFakeClock(time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC))}
	ev, err := events.New(e.client.CoreV1(), objects, prometheus.NewRegistry(), slog.New(slog.DiscardHandler), "gw-pod-1", e.clock)
	must(t, err)
	e.ev = ev
	return e
}

// drain writes every queued Event, one millisecond apart, as Run would.
func (e *eventsEnv) drain(t *testing.T) {
	t.Helper()
	e.ev.WriteQueued(t.Context(), func() { e.clock.Step(time.Millisecond) })
}

func (e *eventsEnv) events(t *testing.T) []corev1.Event {
	t.Helper()
	l, err := e.client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
	must(t, err)
	return l.Items
}

// TestCheckStrangerExpiredTokenRecordsNoEvent goes through a check: an
// expired token of a ServiceAccount no rule admits (default/stranger: a
// namespace editor can mint one), Node-bound to node-a, is refused 401
// token_invalid as any expired token, and writes no Event on node-a's
// WireKubePeer; the same expired token of node-a's agent still does.
func TestCheckStrangerExpiredTokenRecordsNoEvent(t *testing.T) {
	env := newEnv(t, nil)
	e := newEventsEnv(t, env.in)
	env.authz.events = peerEvents{e.ev}
	stranger := tokenSpec{aud: []string{contract.DefaultAudience}, exp: env.clock.Now().Add(-time.Second),
		ns: "default", sa: "stranger", saUID: "uid-sa-stranger", node: &ref{"node-a", nodeAUID}}
	for range 10 {
		resp, err := env.srv.Check(context.Background(), relayCheck(stranger.sign(), nil))
		must(t, err)
		assertDenied(t, resp, contract.ReasonTokenInvalid)
	}
	e.drain(t)
	if got := e.events(t); len(got) != 0 {
		t.Fatalf("Events after 10 expired stranger tokens naming node-a: %+v, want none", got)
	}
	agent := agentSpec(env)
	agent.exp = env.clock.Now().Add(-time.Second)
	resp, err := env.srv.Check(context.Background(), relayCheck(agent.sign(), nil))
	must(t, err)
	assertDenied(t, resp, contract.ReasonTokenInvalid)
	e.drain(t)
	if got := e.events(t); len(got) != 1 || got[0].Reason != "token_expired" || got[0].InvolvedObject.Name != "node-a" {
		t.Fatalf("Events after node-a's agent's expired token: %+v, want one token_expired on node-a", got)
	}
}

// TestCheckRecordsRefusalEvent goes through a check: a WireKubePeer whose key
// another peer holds is refused, and the Event lands on that WireKubePeer
// (the informer's UID), with the key's fingerprint and never the key.
func TestCheckRecordsRefusalEvent(t *testing.T) {
	env := newEnv(t, nil)
	e := newEventsEnv(t, env.in)
	authz, err := NewAuthorizer(env.authz.cfg, Deps{Reviews: env.client.AuthenticationV1(), Objects: env.in,
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler), Now: env.clock.Now, Keys: env.disc.fetch,
		Events: e.ev})
	must(t, err)
	must(t, authz.keys.Refresh(t.Context(), "periodic"))
	resp, err := (&CheckServer{Authorizer: authz}).Check(context.Background(), relayCheck(env.tokens()["peer-dup-key"], nil))
	must(t, err)
	assertDenied(t, resp, contract.ReasonPeerKeyDuplicate)
	e.drain(t)
	got := e.events(t)
	want := corev1.ObjectReference{APIVersion: "wirekube.io/v1alpha1", Kind: "WireKubePeer", Name: "node-m", UID: "uid-peer-node-m"}
	if len(got) != 1 || got[0].InvolvedObject != want || got[0].Reason != "peer_key_duplicate" {
		t.Fatalf("Events %+v, want one peer_key_duplicate on %+v", got, want)
	}
	if !strings.Contains(got[0].Message, "8c0cc17a") || strings.Contains(got[0].Message, dupKeyB64) {
		t.Fatalf("message %q: want the fingerprint 8c0cc17a, never the key", got[0].Message)
	}
}

// TestRevocationRecordsEvent goes through the hub: a live session's
// WireKubePeer key rotates, the hub revokes the session, and the Event lands
// on that WireKubePeer; a binding added after its Pod is gone is revoked at
// once and recorded too.
func TestRevocationRecordsEvent(t *testing.T) {
	env := newEnv(t, nil)
	e := newEventsEnv(t, env.in)
	env.authz.events = peerEvents{e.ev}
	hub, err := newHub(env, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	must(t, err)
	st := revocationhub.NewStream()
	if added, _ := st.Add(1, peerSABinding(), 10); !added {
		t.Fatal("binding not added")
	}
	_, err = env.dyn.Resource(PeerGVR).Update(t.Context(), peerObject("node-b", "CAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAg="), metav1.UpdateOptions{})
	must(t, err)
	testutil.Eventually(t, "node-b's new key in the cache", func() bool {
		k, _ := env.in.PeerKey("node-b")
		return k == "CAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAg="
	})
	st.MarkDirty(revocationhub.ObjectKey(revocationhub.KindPeer, "", "node-b"), time.Now())
	must(t, env.client.CoreV1().Pods("wirekube-system").Delete(t.Context(), "agent-a", metav1.DeleteOptions{}))
	testutil.Eventually(t, "agent-a gone from the cache", func() bool { _, ok := env.in.Pod("wirekube-system", "agent-a"); return !ok })
	st.Queue(revocation.Op{Kind: revocation.KindAdd, ID: 2, Binding: podBinding().Format()})
	if out := hub.Judge(st); len(out) != 2 {
		t.Fatalf("revocations %+v, want 2", out)
	}
	e.drain(t)
	got := map[string]string{}
	for _, ev := range e.events(t) {
		got[ev.InvolvedObject.Kind+"/"+ev.InvolvedObject.Name+"/"+string(ev.InvolvedObject.UID)] = ev.Reason + " " + ev.Type
	}
	want := map[string]string{
		"WireKubePeer/node-b/uid-peer-node-b": "peer_key_changed Warning",
		"WireKubePeer/node-a/uid-peer-node-a": "pod_not_found Normal",
	}
	if len(got) != len(want) || got["WireKubePeer/node-b/uid-peer-node-b"] != want["WireKubePeer/node-b/uid-peer-node-b"] ||
		got["WireKubePeer/node-a/uid-peer-node-a"] != want["WireKubePeer/node-a/uid-peer-node-a"] {
		t.Fatalf("Events %v, want %v", got, want)
	}
}

// TestCheckRecordsExpiredTokenEvent goes through a check: node-a's agent
// presents its Pod-bound token after exp; the Event token_expired lands on
// WireKubePeer node-a, the node of the token's verified claims.
func TestCheckRecordsExpiredTokenEvent(t *testing.T) {
	env := newEnv(t, nil)
	e := newEventsEnv(t, env.in)
	env.authz.events = peerEvents{e.ev}
	spec := agentSpec(env)
	spec.exp = env.clock.Now().Add(-time.Second)
	resp, err := env.srv.Check(context.Background(), relayCheck(spec.sign(), nil))
	must(t, err)
	assertDenied(t, resp, contract.ReasonTokenInvalid)
	e.drain(t)
	got := e.events(t)
	want := corev1.ObjectReference{APIVersion: "wirekube.io/v1alpha1", Kind: "WireKubePeer", Name: "node-a", UID: "uid-peer-node-a"}
	if len(got) != 1 || got[0].InvolvedObject != want || got[0].Reason != "token_expired" {
		t.Fatalf("Events %+v, want one token_expired on %+v", got, want)
	}
}
