//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// testPeerEvents: extauthz (with manifests/base's RBAC) records Events on
// the WireKubePeer, found by the field selector `kubectl describe wkpeer`
// uses, once per object within the rate limit. One front suffices: the
// Events come from extauthz alone.
func (e *env) testPeerEvents(t *testing.T) {
	t.Run("cluster_scoped_events_only_in_default", e.testEventsNamespace)
	f := e.fronts[0]
	x := e.podAgent(t, peerName(f, "ev-x"))
	y := e.podAgent(t, peerName(f, "ev-y"))
	// A revocation: X's key rotates under its live session.
	c := session(t, f, x)
	x.key = e.newKey(t)
	e.setPeerKey(t, x.peer, x.key.Base64())
	wantClose(t, c, websocket.ClosePolicyViolation, contract.ClosePeerKeyChanged, revocationBound)
	evs := e.waitPeerEvents(t, x.peer, "peer_key_changed", func(evs []corev1.Event) bool { return len(evs) > 0 })
	if len(evs) != 1 || evs[0].Count != 1 || evs[0].Type != "Warning" || evs[0].Namespace != "default" ||
		evs[0].Source.Component != "wirekube-extauthz" {
		t.Fatalf("Events on WireKubePeer %s: %+v, want one Warning peer_key_changed, count 1, in default, from wirekube-extauthz", x.peer, evs)
	}
	// Refusals: Y copies X's key; 8 refused upgrades of Y, then one of X.
	// Events are written in order, so once X's is there all 8 of Y's were
	// judged: one Event, counted up to the burst of 5.
	e.setPeerKey(t, y.peer, x.key.Base64())
	for range 8 {
		wantRefused(t, f.opts(y), http.StatusForbidden, contract.ReasonPeerKeyDuplicate)
	}
	wantRefused(t, f.opts(x), http.StatusForbidden, contract.ReasonPeerKeyDuplicate)
	e.waitPeerEvents(t, x.peer, "peer_key_duplicate", func(evs []corev1.Event) bool { return len(evs) == 1 })
	evs = e.waitPeerEvents(t, y.peer, "peer_key_duplicate", func([]corev1.Event) bool { return true })
	if len(evs) != 1 || evs[0].Count != 5 || !strings.Contains(evs[0].Message, "relay upgrade refused") ||
		strings.Contains(evs[0].Message, x.key.Base64()) || !strings.Contains(evs[0].Message, x.key.Fingerprint()) {
		t.Fatalf("Events on WireKubePeer %s after 8 refusals: %+v, want one, count 5, with the key's fingerprint %s only",
			y.peer, evs, x.key.Fingerprint())
	}
	// An agent presenting its Pod-bound token (with the node claim
	// kube-apiserver adds for a scheduled Pod) after exp, as when kubelet
	// did not refresh it: 401 token_invalid, Event token_expired on its peer.
	z := e.podAgent(t, peerName(f, "ev-z"))
	sa, err := e.cluster.Client.CoreV1().ServiceAccounts(stack.Namespace).Get(context.Background(), agentSA, metav1.GetOptions{})
	fatalIf(t, err)
	node, err := e.cluster.Client.CoreV1().Nodes().Get(context.Background(), z.peer, metav1.GetOptions{})
	fatalIf(t, err)
	tok, err := e.cluster.SignToken(stack.SignedTokenOptions{ServiceAccount: sa, Pod: z.pod, Node: node, Audience: contract.DefaultAudience,
		IssuedAt: time.Now().Add(-2 * time.Hour), Expiry: time.Now().Add(-time.Minute)})
	fatalIf(t, err)
	z.tokenFile = e.writeTokenFile(t, z.peer+"-expired", e.track(tok))
	wantRefused(t, f.opts(z), http.StatusUnauthorized, contract.ReasonTokenInvalid)
	evs = e.waitPeerEvents(t, z.peer, "token_expired", func([]corev1.Event) bool { return true })
	if len(evs) != 1 || evs[0].Type != "Warning" || strings.Contains(evs[0].Message, tok) {
		t.Fatalf("Events on WireKubePeer %s after its expired token: %+v, want one Warning token_expired", z.peer, evs)
	}
}

// testEventsNamespace: why the Events are in default and not in the
// gateway's namespace. kube-apiserver refuses an Event about a
// cluster-scoped object anywhere else.
func (e *env) testEventsNamespace(t *testing.T) {
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "ns-probe-"},
		InvolvedObject: corev1.ObjectReference{APIVersion: "wirekube.io/v1alpha1", Kind: "WireKubePeer", Name: "probe"},
		Reason:         "probe", Message: "probe", Type: "Normal", Source: corev1.EventSource{Component: "e2e"},
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
	}
	_, err := e.cluster.Client.CoreV1().Events(stack.Namespace).Create(context.Background(), ev, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "does not match event.namespace") {
		t.Fatalf("Event about a cluster-scoped object in %s: %v, want Invalid (does not match event.namespace)", stack.Namespace, err)
	}
}

// setPeerKey writes key into WireKubePeer peer's spec.publicKey.
func (e *env) setPeerKey(t *testing.T, peer, key string) {
	t.Helper()
	ctx := context.Background()
	u, err := e.cluster.Dynamic.Resource(stack.PeerGVR).Get(ctx, peer, metav1.GetOptions{})
	fatalIf(t, err)
	u.Object["spec"].(map[string]any)["publicKey"] = key
	_, err = e.cluster.Dynamic.Resource(stack.PeerGVR).Update(ctx, u, metav1.UpdateOptions{})
	fatalIf(t, err)
}

// waitPeerEvents lists the Events of WireKubePeer peer with reason as
// kubectl describe does for a cluster-scoped object (k8s.io/kubectl
// pkg/describe searchEvents: every namespace, field selector on the
// involved object's name, empty namespace, kind and UID) until done holds.
func (e *env) waitPeerEvents(t *testing.T, peer, reason string, done func([]corev1.Event) bool) []corev1.Event {
	t.Helper()
	ctx := context.Background()
	u, err := e.cluster.Dynamic.Resource(stack.PeerGVR).Get(ctx, peer, metav1.GetOptions{})
	fatalIf(t, err)
	name, ns, kind, uid := u.GetName(), u.GetNamespace(), u.GetKind(), string(u.GetUID())
	events := e.cluster.Client.CoreV1().Events("")
	sel := events.GetFieldSelector(&name, &ns, &kind, &uid).String()
	var got []corev1.Event
	testutil.EventuallyWithin(t, 10*time.Second, reason+" Events on WireKubePeer "+peer, func() bool {
		l, err := events.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false
		}
		got = got[:0]
		for _, ev := range l.Items {
			if ev.Reason == reason {
				got = append(got, ev)
			}
		}
		return len(got) > 0 && done(got)
	})
	return got
}
