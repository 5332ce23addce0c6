//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"testing"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// ownedAgent is a node's agent as WireKube runs it: a Node, an agent Pod on
// it, an API client with the Pod's token (api) and a relay identity (id)
// whose WireKubePeer api creates, named after the node and owned by it.
type ownedAgent struct {
	id  identity
	api *admissionClient
}

func (e *env) ownedAgent(t *testing.T, node string) ownedAgent {
	t.Helper()
	api := e.admissionAgent(t, node, true)
	pod, err := e.cluster.Client.CoreV1().Pods(stack.Namespace).Get(context.Background(), "agent-"+node, metav1.GetOptions{})
	fatalIf(t, err)
	a := ownedAgent{id: identity{peer: node, key: e.newKey(t), pod: pod}, api: api}
	fatalIf(t, api.upsertOwnPeerCreate(a.id.key.Base64()))
	bound := stack.TokenOptions{BoundKind: "Pod", BoundName: pod.Name, BoundUID: string(pod.UID)}
	a.id.token = e.tokenFor(t, stack.Namespace, agentSA, bound)
	a.id.tokenFile = e.writeTokenFile(t, node, a.id.token)
	e.waitPeerSeen(t, a.id, agentSA, bound)
	return a
}

// testKeyGap against the real kube-apiserver, with the WireKubePeer
// admission policy in force: V's WireKubePeer (owned by its Node, as
// WireKube's agent creates it) is deleted by an operator while Node V
// stays. In that gap M's agent writes V's key into its own WireKubePeer
// (the policy admits it: it is M's own peer) and is refused 403
// peer_key_moved, with a Warning Event on M's WireKubePeer: M never holds a
// session with V's key. M gives the key back; V's agent creates its peer
// again with its key and is admitted, and receives the frames M sends to
// that key.
func (e *env) testKeyGap(t *testing.T) {
	f := e.fronts[0]
	e.grantAgentPeerRBAC(t)
	e.installPeerAdmission(t)
	v, m := e.ownedAgent(t, peerName(f, "kg-v")), e.ownedAgent(t, peerName(f, "kg-m"))
	e.waitPolicyEnforced(t, m.api)
	c := session(t, f, v.id)
	fatalIf(t, e.cluster.Dynamic.Resource(stack.PeerGVR).Delete(context.Background(), v.id.peer, metav1.DeleteOptions{}))
	wantClose(t, c, websocket.ClosePolicyViolation, contract.ReasonPeerNotFound, revocationBound)

	wantPolicyAdmitted(t, "M writes V's key into its own peer", m.api.upsertOwnPeerPatch(v.id.key.Base64(), ""))
	m.id.key = v.id.key
	// On a tree that forgets a deleted peer's keys M is admitted here, and
	// the wait ends without the refusal.
	testutil.EventuallyWithin(t, revocationBound, "extauthz to refuse M holding V's key, peer_key_moved", func() bool {
		_, reason := e.askExtauthz(t, m.id.token)
		return reason == string(contract.ReasonPeerKeyMoved)
	})
	wantRefused(t, f.opts(m.id), http.StatusForbidden, contract.ReasonPeerKeyMoved)
	evs := e.waitPeerEvents(t, m.id.peer, "peer_key_moved", func([]corev1.Event) bool { return true })
	if evs[0].Type != "Warning" {
		t.Fatalf("Events on M's WireKubePeer: %+v, want a Warning peer_key_moved", evs)
	}

	m.id.key = e.newKey(t)
	wantPolicyAdmitted(t, "M gives the key back", m.api.upsertOwnPeerPatch(m.id.key.Base64(), ""))
	wantPolicyAdmitted(t, "V's agent creates its peer again", v.api.upsertOwnPeerCreate(v.id.key.Base64()))
	testutil.EventuallyWithin(t, revocationBound, "extauthz to admit V's re-created peer with its key", func() bool {
		status, _ := e.askExtauthz(t, v.id.token)
		return status == http.StatusOK
	})
	vc := session(t, f, v.id)
	mc := session(t, f, m.id)
	exchange(t, mc, vc, m.id.key, v.id.key)
}
