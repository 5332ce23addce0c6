package extauthz

import (
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
)

// TestRejudgeIdentityLeadsToAnotherPeer: a binding whose identity now leads
// to another WireKubePeer is revoked with node_mismatch
// (docs/spec.md#close-reasons), before its key is compared. The per-peer
// ServiceAccount wirekube-relay-peer-node-b was admitted for node-b with a
// token bound to Pod peer-b-pod on node-a; once the configuration lists it
// as an agent ServiceAccount, its peer is the Pod's node, node-a, whose key
// is another one (so the key check alone would say peer_key_changed).
func TestRejudgeIdentityLeadsToAnotherPeer(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.AgentServiceAccounts = []string{"wirekube-system/wirekube-agent", "wirekube-system/wirekube-relay-peer-node-b"}
	})
	if r := e.authz.Rejudge(peerPodBinding()); r != contract.ReasonNodeMismatch {
		t.Fatalf("Rejudge = %q, want %s", r, contract.ReasonNodeMismatch)
	}
	if r := e.authz.Rejudge(podBinding()); r != "" {
		t.Fatalf("the agent's own binding: Rejudge = %q, want it to hold", r)
	}
}
