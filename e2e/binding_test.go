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
)

// testBindingRules: every identity kind without blind spots, against the
// real kube-apiserver: a per-peer ServiceAccount's Pod-bound token is held
// to its Pod, and a Pod-bound token to its Pod's Node, both for the live
// session (closed) and the next upgrade (refused).
func (e *env) testBindingRules(t *testing.T, f front) {
	ctx := context.Background()
	del := metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}
	t.Run("per_peer_pod_bound_pod_deleted", func(t *testing.T) {
		id := e.peerPodIdentity(t, peerName(f, "b-peerpod"))
		c := session(t, f, id)
		deleted := time.Now()
		fatalIf(t, e.cluster.Client.CoreV1().Pods(stack.Namespace).Delete(ctx, id.pod.Name, del))
		wantClose(t, c, websocket.ClosePolicyViolation, contract.ReasonPodNotFound, revocationBound)
		waitRefused(t, f.opts(id), http.StatusForbidden, contract.ReasonPodNotFound, deleted)
	})
	t.Run("pod_bound_agent_node_deleted", func(t *testing.T) {
		id := e.podAgent(t, peerName(f, "b-podnode"))
		c := session(t, f, id)
		deleted := time.Now()
		fatalIf(t, e.cluster.Client.CoreV1().Nodes().Delete(ctx, id.peer, del))
		wantClose(t, c, websocket.ClosePolicyViolation, contract.ReasonNodeMismatch, revocationBound)
		waitRefused(t, f.opts(id), http.StatusForbidden, contract.ReasonNodeMismatch, deleted)
	})
	t.Run("secret_bound_token_refused", func(t *testing.T) { e.testSecretBound(t, f) })
	t.Run("key_squatting", func(t *testing.T) { e.testKeySquatting(t, f) })
	t.Run("replace_only_same_binding", func(t *testing.T) { e.testReplaceOnlySameBinding(t, f) })
	t.Run("per_peer_pod_bound_node_deleted", func(t *testing.T) {
		id := e.peerPodIdentity(t, peerName(f, "b-peernode"))
		c := session(t, f, id)
		fatalIf(t, e.cluster.Client.CoreV1().Nodes().Delete(ctx, id.pod.Spec.NodeName, del))
		wantClose(t, c, websocket.ClosePolicyViolation, contract.ReasonNodeMismatch, revocationBound)
	})
}

// peerPodIdentity: a per-peer ServiceAccount wirekube-relay-peer-<peer>, a
// Pod running under it on its own Node, the WireKubePeer and a Pod-bound
// token of that ServiceAccount, as a projected token in a Pod is.
func (e *env) peerPodIdentity(t *testing.T, peer string) identity {
	t.Helper()
	ctx := context.Background()
	sa, err := e.cluster.CreateServiceAccount(ctx, stack.Namespace, peerSAPrefix+peer)
	fatalIf(t, err)
	node := peer + "-host"
	_, err = e.cluster.CreateNode(ctx, node)
	fatalIf(t, err)
	pod, err := e.cluster.CreatePod(ctx, stack.Namespace, "client-"+peer, sa.Name, node)
	fatalIf(t, err)
	id := identity{peer: peer, key: e.newKey(t), sa: sa, pod: pod}
	fatalIf(t, e.cluster.CreatePeer(ctx, peer, id.key.Base64()))
	id.token = e.tokenFor(t, stack.Namespace, sa.Name, stack.TokenOptions{BoundKind: "Pod", BoundName: pod.Name, BoundUID: string(pod.UID)})
	id.tokenFile = e.writeTokenFile(t, peer, id.token)
	return id
}

// testSecretBound: a real Secret-bound token of a per-peer ServiceAccount
// (which kube-apiserver accepts) is refused on the relay path.
func (e *env) testSecretBound(t *testing.T, f front) {
	ctx := context.Background()
	id := e.peerSAIdentity(t, peerName(f, "b-secret"), true, "")
	sec, err := e.cluster.Client.CoreV1().Secrets(stack.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bound-" + id.peer}}, metav1.CreateOptions{})
	fatalIf(t, err)
	tok := e.tokenFor(t, stack.Namespace, id.sa.Name, stack.TokenOptions{BoundKind: "Secret", BoundName: sec.Name, BoundUID: string(sec.UID)})
	if st := e.review(t, tok); !st.Authenticated {
		t.Fatalf("kube-apiserver does not accept the Secret-bound token: %+v", st)
	}
	wantRefused(t, f.withToken(tok), http.StatusForbidden, contract.ReasonTokenSecretBound)
}

// testKeySquatting: node M writes node V's key into M's own WireKubePeer
// (WireKube's agent RBAC allows it). V's live session closes with
// peer_key_duplicate, M is refused with 403 peer_key_duplicate, and V is
// admitted again once M's WireKubePeer holds M's key.
func (e *env) testKeySquatting(t *testing.T, f front) {
	ctx := context.Background()
	v := e.podAgent(t, peerName(f, "b-victim"))
	m := e.podAgent(t, peerName(f, "b-squatter"))
	c := session(t, f, v)
	setKey := func(peer, key string) {
		u, err := e.cluster.Dynamic.Resource(stack.PeerGVR).Get(ctx, peer, metav1.GetOptions{})
		fatalIf(t, err)
		u.Object["spec"].(map[string]any)["publicKey"] = key
		_, err = e.cluster.Dynamic.Resource(stack.PeerGVR).Update(ctx, u, metav1.UpdateOptions{})
		fatalIf(t, err)
	}
	setKey(m.peer, v.key.Base64())
	wantClose(t, c, websocket.ClosePolicyViolation, contract.ReasonPeerKeyDuplicate, revocationBound)
	wantRefused(t, f.opts(m), http.StatusForbidden, contract.ReasonPeerKeyDuplicate)
	wantRefused(t, f.opts(v), http.StatusForbidden, contract.ReasonPeerKeyDuplicate)
	setKey(m.peer, m.key.Base64())
	var err error
	for start := time.Now(); time.Since(start) < revocationBound; time.Sleep(100 * time.Millisecond) {
		var c *testagent.Conn
		if c, err = dialAgent(f.opts(v), v.key); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("victim not admitted after the squatter's key was restored: %v", err)
}
