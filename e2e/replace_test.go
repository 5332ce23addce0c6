//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
)

// agentAndPeerSA: a Pod-bound agent of a new peer, and a token of the
// same peer's per-peer ServiceAccount (unbound) for the same key: two
// bindings of one peer and key.
func (e *env) agentAndPeerSA(t *testing.T, peer string) (agent, perPeer identity) {
	t.Helper()
	perPeer = e.peerSAIdentity(t, peer, false, "")
	agent = e.podAgent(t, peer) // its token file replaces perPeer's (one file per peer name)
	perPeer.key = agent.key
	perPeer.tokenFile = e.writeTokenFile(t, peer+".peer-sa", perPeer.token)
	return agent, perPeer
}

// testReplaceOnlySameBinding, against the real
// kube-apiserver. A live agent-token session of peer P is not replaced by
// a per-peer-token session of P (403 key_held_by_other_binding, the agent
// still echoes) and vice versa; the agent's reconnect with its own binding
// still replaces its old session at once.
func (e *env) testReplaceOnlySameBinding(t *testing.T, f front) {
	agent, perPeer := e.agentAndPeerSA(t, peerName(f, "b-bind"))
	a := session(t, f, agent)
	wantRefused(t, f.opts(perPeer), http.StatusForbidden, contract.ReasonKeyHeldByOtherBinding)
	alive(t, a, agent.key)
	again := session(t, f, agent) // the same binding: the agent's reconnect
	wantClose(t, a, websocket.ClosePolicyViolation, contract.CloseSessionReplaced, ioTimeout)
	alive(t, again, agent.key)
	again.Close()
	// session waits out key_held_by_other_binding until the agent's end
	// has reached the bridge and extauthz.
	p := session(t, f, perPeer)
	wantRefused(t, f.opts(agent), http.StatusForbidden, contract.ReasonKeyHeldByOtherBinding)
	alive(t, p, perPeer.key)
}

// testBindingAcrossReplicas: two bridges stream to one extauthz, behind
// one nginx (round robin). With the agent's session on the stack's bridge,
// per-peer-token upgrades through that nginx are all refused by extauthz
// before any bridge is picked, including the ones nginx would send to the
// second bridge, which does not hold the key (docs/revocation.md#replacement).
func (e *env) testBindingAcrossReplicas(t *testing.T) {
	rep, err := e.stack.StartReplicas(context.Background())
	fatalIf(t, err)
	defer func() { fatalIf(t, rep.Close()) }()
	both := front{name: "nginx", url: "wss://" + rep.NginxAddr + "/relay", tls: e.fronts[0].tls}
	agent, perPeer := e.agentAndPeerSA(t, "x-bind-replicas")
	a := session(t, e.fronts[0], agent) // the stack's own front: the stack's bridge
	// Round robin: two of them would go to the second bridge.
	for range 4 {
		wantRefused(t, both.opts(perPeer), http.StatusForbidden, contract.ReasonKeyHeldByOtherBinding)
	}
	alive(t, a, agent.key)
}
