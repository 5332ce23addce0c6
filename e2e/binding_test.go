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
)

// testBindingRules: issue 20's identities without blind spots, against the
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
