//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testagent"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// testKeyMoved against the real kube-apiserver: node M
// writes a fresh key into victim V's WireKubePeer, then V's old key into
// its own. Each key is held by one peer, so no peer_key_duplicate; V's
// session closes peer_key_changed; M, with its own valid token and V's old
// key, is refused 403 peer_key_moved, and both WireKubePeers carry a
// Warning peer_key_moved Event. Once V's WireKubePeer is deleted the key is
// M's and M is admitted.
func (e *env) testKeyMoved(t *testing.T) {
	f := e.fronts[0]
	v := e.podAgent(t, peerName(f, "km-victim"))
	m := e.podAgent(t, peerName(f, "km-mover"))
	c := session(t, f, v)
	stolen := v.key
	v.key = e.newKey(t)
	e.setPeerKey(t, v.peer, v.key.Base64())
	wantClose(t, c, websocket.ClosePolicyViolation, contract.ClosePeerKeyChanged, revocationBound)
	e.setPeerKey(t, m.peer, stolen.Base64())
	m.key = stolen
	var reason string
	testutil.EventuallyWithin(t, revocationBound, "extauthz to refuse M's moved key", func() bool {
		_, reason = e.askExtauthz(t, m.token)
		return reason == string(contract.ReasonPeerKeyMoved)
	})
	wantRefused(t, f.opts(m), http.StatusForbidden, contract.ReasonPeerKeyMoved)
	for _, p := range []string{m.peer, v.peer} {
		evs := e.waitPeerEvents(t, p, "peer_key_moved", func([]corev1.Event) bool { return true })
		if evs[0].Type != "Warning" || evs[0].Source.Component != "wirekube-extauthz" {
			t.Fatalf("Events on WireKubePeer %s: %+v, want a Warning peer_key_moved from wirekube-extauthz", p, evs)
		}
	}
	fatalIf(t, e.cluster.Dynamic.Resource(stack.PeerGVR).Delete(context.Background(), v.peer, metav1.DeleteOptions{}))
	var err error
	for start := time.Now(); time.Since(start) < revocationBound; time.Sleep(100 * time.Millisecond) {
		var c *testagent.Conn
		if c, err = dialAgent(f.opts(m), m.key); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("M not admitted with the key after V's WireKubePeer was deleted: %v", err)
}

// testStrangerEvents against the real kube-apiserver: 30
// expired Node-bound tokens of a ServiceAccount no rule admits (one a
// namespace editor can mint), naming Z's node, write no Event on Z's
// WireKubePeer; Z's own expired tokens spend the refusal budget of Z's
// WireKubePeer (count 5); Z's revocation still records peer_key_changed.
func (e *env) testStrangerEvents(t *testing.T) {
	ctx := context.Background()
	f := e.fronts[0]
	z := e.podAgent(t, peerName(f, "se-z"))
	node, err := e.cluster.Client.CoreV1().Nodes().Get(ctx, z.peer, metav1.GetOptions{})
	fatalIf(t, err)
	stranger, err := e.cluster.CreateServiceAccount(ctx, metav1.NamespaceDefault, "e2e-stranger")
	fatalIf(t, err)
	agent, err := e.cluster.Client.CoreV1().ServiceAccounts(stack.Namespace).Get(ctx, agentSA, metav1.GetOptions{})
	fatalIf(t, err)
	expired := func(sa *corev1.ServiceAccount, pod *corev1.Pod) string {
		tok, err := e.cluster.SignToken(stack.SignedTokenOptions{ServiceAccount: sa, Pod: pod, Node: node,
			Audience: contract.DefaultAudience, IssuedAt: time.Now().Add(-2 * time.Hour), Expiry: time.Now().Add(-time.Minute)})
		fatalIf(t, err)
		return e.track(tok)
	}
	strangerTok := expired(stranger, nil)
	for range 30 {
		if status, reason := e.askExtauthz(t, strangerTok); status != http.StatusUnauthorized || reason != string(contract.ReasonTokenInvalid) {
			t.Fatalf("stranger's expired token: %d %s, want 401 token_invalid", status, reason)
		}
	}
	// One of Z's own: the refusal writer writes in order, so once its
	// Event is there every stranger refusal before it was judged.
	zTok := expired(agent, z.pod)
	e.askExtauthz(t, zTok)
	evs := e.waitPeerEvents(t, z.peer, "token_expired", func([]corev1.Event) bool { return true })
	if len(evs) != 1 || evs[0].Count != 1 {
		t.Fatalf("token_expired Events on %s after 30 stranger tokens and 1 of its own: %+v, want one, count 1", z.peer, evs)
	}
	for range 8 {
		e.askExtauthz(t, zTok)
	}
	e.waitPeerEvents(t, z.peer, "token_expired", func(evs []corev1.Event) bool { return len(evs) == 1 && evs[0].Count == 5 })
	c := session(t, f, z)
	z.key = e.newKey(t)
	e.setPeerKey(t, z.peer, z.key.Base64())
	wantClose(t, c, websocket.ClosePolicyViolation, contract.ClosePeerKeyChanged, revocationBound)
	evs = e.waitPeerEvents(t, z.peer, "peer_key_changed", func([]corev1.Event) bool { return true })
	if len(evs) != 1 || evs[0].Type != "Warning" {
		t.Fatalf("peer_key_changed Events on %s after its refusal budget was spent: %+v, want one Warning", z.peer, evs)
	}
}
