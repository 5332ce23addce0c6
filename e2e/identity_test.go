//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
)

// apiserverCacheWindow is how long kube-apiserver keeps accepting a token
// whose bound object is gone (docs/spec.md#apiserver-cache): revocation must beat it.
const apiserverCacheWindow = 10 * time.Second

// testIdentity: scenario 3, every identity rule with its own objects.
func (e *env) testIdentity(t *testing.T, f front) {
	ctx := context.Background()
	t.Run("service_account_not_allowlisted", func(t *testing.T) {
		node := peerName(f, "s3-other")
		_, err := e.cluster.CreateNode(ctx, node)
		fatalIf(t, err)
		pod, err := e.cluster.CreatePod(ctx, stack.Namespace, "other-"+node, "wirekube-other", node)
		fatalIf(t, err)
		fatalIf(t, e.cluster.CreatePeer(ctx, node, e.newKey(t).Base64()))
		tok := e.tokenFor(t, stack.Namespace, "wirekube-other", stack.TokenOptions{BoundKind: "Pod", BoundName: pod.Name, BoundUID: string(pod.UID)})
		e.wantRefusedWithoutReview(t, f.withToken(tok), http.StatusForbidden, contract.ReasonIdentityNotAllowed)
	})
	t.Run("agent_name_in_wrong_namespace", func(t *testing.T) {
		node := peerName(f, "s3-elsewhere")
		_, err := e.cluster.CreateNode(ctx, node)
		fatalIf(t, err)
		pod, err := e.cluster.CreatePod(ctx, "wirekube-elsewhere", "agent-"+node, agentSA, node)
		fatalIf(t, err)
		fatalIf(t, e.cluster.CreatePeer(ctx, node, e.newKey(t).Base64()))
		tok := e.tokenFor(t, "wirekube-elsewhere", agentSA, stack.TokenOptions{BoundKind: "Pod", BoundName: pod.Name, BoundUID: string(pod.UID)})
		e.wantRefusedWithoutReview(t, f.withToken(tok), http.StatusForbidden, contract.ReasonIdentityNotAllowed)
	})
	t.Run("unbound_agent_token", func(t *testing.T) {
		tok := e.tokenFor(t, stack.Namespace, agentSA, stack.TokenOptions{})
		wantRefused(t, f.withToken(tok), http.StatusForbidden, contract.ReasonTokenNotBound)
	})
	t.Run("pod_deleted_then_recreated", func(t *testing.T) { e.testPodGone(t, f) })
	t.Run("service_account_deleted_and_recreated", func(t *testing.T) { e.testSAGone(t, f) })
	t.Run("wirekubepeer_missing", func(t *testing.T) {
		id := e.peerSAIdentity(t, peerName(f, "s3-nopeer"), false, "")
		wantRefused(t, f.opts(id), http.StatusForbidden, contract.ReasonPeerNotFound)
	})
	t.Run("peer_key_not_32_bytes", func(t *testing.T) {
		short := base64.StdEncoding.EncodeToString(randomBytes(31))
		id := e.peerSAIdentity(t, peerName(f, "s3-shortkey"), true, short)
		wantRefused(t, f.opts(id), http.StatusForbidden, contract.ReasonPeerKeyInvalid)
	})
}

// testPodGone: a live agent's Pod is force-deleted. Its token is denied at
// once (well inside kube-apiserver's own ~10 s validation cache, and while
// extauthz still has the TokenReview cached), and stays denied when a Pod
// with the same name (a new UID) appears.
func (e *env) testPodGone(t *testing.T, f front) {
	ctx := context.Background()
	id := e.podAgent(t, peerName(f, "s3-podgone"))
	session(t, f, id).Close() // the TokenReview is now cached by extauthz
	deleted := time.Now()
	fatalIf(t, e.cluster.DeletePodNow(ctx, stack.Namespace, id.pod.Name))
	waitRefused(t, f.opts(id), http.StatusForbidden, contract.ReasonPodNotFound, deleted)
	_, err := e.cluster.CreatePod(ctx, stack.Namespace, id.pod.Name, agentSA, id.peer)
	fatalIf(t, err)
	waitRefused(t, f.opts(id), http.StatusForbidden, contract.ReasonPodUIDMismatch, deleted)
}

// testSAGone: a per-peer ServiceAccount is deleted, then recreated with the
// same name (a new UID): its old token is denied at once both times.
func (e *env) testSAGone(t *testing.T, f front) {
	ctx := context.Background()
	id := e.peerSAIdentity(t, peerName(f, "s3-sagone"), true, "")
	session(t, f, id).Close()
	deleted := time.Now()
	fatalIf(t, e.cluster.DeleteServiceAccount(ctx, stack.Namespace, id.sa.Name))
	waitRefused(t, f.opts(id), http.StatusForbidden, contract.ReasonServiceAccountNotFound, deleted)
	_, err := e.cluster.CreateServiceAccount(ctx, stack.Namespace, id.sa.Name)
	fatalIf(t, err)
	waitRefused(t, f.opts(id), http.StatusForbidden, contract.ReasonServiceAccountNotFound, deleted)
}

// waitRefused retries while extauthz's informer catches up (milliseconds)
// and fails unless the expected deny arrives before kube-apiserver's own
// cache window since the change has passed.
func waitRefused(t *testing.T, o agentOptions, status int, reason contract.Reason, since time.Time) {
	t.Helper()
	var last error
	for time.Since(since) < apiserverCacheWindow-time.Second {
		c, err := dialRaw(o)
		if err == nil {
			c.Close()
		} else if denyMatches(err, status, reason) {
			t.Logf("denied %d %s %s after the change", status, reason, time.Since(since).Round(time.Millisecond))
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("not denied with HTTP %d %s within %s of the change; last: %v", status, reason, apiserverCacheWindow-time.Second, last)
}
