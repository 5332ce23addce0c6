package binding

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// serviceAccountLive checks that the ServiceAccount still exists with the UID
// TokenReview reported, so deleting (or recreating) it revokes at once.
func (r *Rules) serviceAccountLive(sa ServiceAccount, uid string) bool {
	obj, ok := r.objects.ServiceAccount(sa.Namespace, sa.Name)
	return ok && uid != "" && string(obj.UID) == uid
}

// BindPeer applies the identity rules of the relay path and, on success,
// returns the peer, its key and the binding. The Pod and Node rules
// (checkBound) run for every identity whose token names a Pod or a Node,
// the per-peer ServiceAccounts included: a bound token is worth no more
// than its bound object (docs/revocation.md#identities).
func (r *Rules) BindPeer(s *Subject) Result {
	sa, ok := ParseUsername(s.Username)
	if !ok {
		return refuse(contract.ReasonIdentityNotAllowed)
	}
	isAgent := r.cfg.Agents[sa]
	var peer string
	switch {
	case isAgent:
	case sa.Namespace == r.cfg.PeerNamespace && strings.HasPrefix(sa.Name, r.cfg.PeerPrefix):
		peer = strings.TrimPrefix(sa.Name, r.cfg.PeerPrefix)
		if peer == "" {
			return refuse(contract.ReasonIdentityNotAllowed)
		}
	default:
		return refuse(contract.ReasonIdentityNotAllowed)
	}
	if !r.serviceAccountLive(sa, s.UID) {
		return refuse(contract.ReasonServiceAccountNotFound)
	}
	node, reason := r.checkBound(sa, s)
	if reason != "" {
		return refuse(reason)
	}
	if isAgent {
		// An agent's peer is the node its token is bound to.
		if node == "" {
			return refuse(contract.ReasonTokenNotBound)
		}
		peer = node
	}
	return r.peerKey(peer, node, s)
}

// checkBound checks the objects a token is bound to against the informers:
// the Pod (same UID, running under the token's ServiceAccount, not
// Succeeded or Failed, scheduled, on the Node the token names) and the Node
// (existing, with the UID the token names). It returns the node the token
// is bound to: the Pod's node for a Pod-bound token, the Node of a
// Node-bound token, "" for an unbound token.
func (r *Rules) checkBound(sa ServiceAccount, s *Subject) (string, contract.Reason) {
	switch {
	case s.PodName != "":
		pod, ok := r.objects.Pod(sa.Namespace, s.PodName)
		switch {
		case !ok:
			return "", contract.ReasonPodNotFound
		case s.PodUID == "" || string(pod.UID) != s.PodUID:
			return "", contract.ReasonPodUIDMismatch
		case pod.Spec.ServiceAccountName != sa.Name:
			return "", contract.ReasonPodServiceAccountMismatch
		case podTerminated(pod):
			return "", contract.ReasonPodTerminated
		case pod.Spec.NodeName == "":
			return "", contract.ReasonPodNotScheduled
		case s.NodeName != "" && pod.Spec.NodeName != s.NodeName:
			return "", contract.ReasonNodeMismatch
		}
		// The Pod's Node must exist too: deleting a Node ends the Pod-bound
		// sessions on it (the Pod object may outlive it for a while).
		return pod.Spec.NodeName, r.checkNode(pod.Spec.NodeName, s.NodeUID)
	case s.NodeName != "":
		return s.NodeName, r.checkNode(s.NodeName, s.NodeUID)
	}
	return "", ""
}

// podTerminated reports a Pod in a terminal phase: none of its containers
// will run again (restartPolicy Never or OnFailure exhausted, or evicted),
// so its token speaks for nothing. kube-apiserver keeps accepting the token
// until the Pod object is deleted, which may be never (a Job's Pods stay).
func podTerminated(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// checkNode reports node_mismatch unless the Node exists and, when the
// token names its UID, has that UID (a Node deleted and recreated under the
// same name is another Node).
func (r *Rules) checkNode(name, uid string) contract.Reason {
	node, ok := r.objects.Node(name)
	if !ok || (uid != "" && node.UID != types.UID(uid)) {
		return contract.ReasonNodeMismatch
	}
	return ""
}

// peerKey looks up the peer's key, checks that no other WireKubePeer holds
// or first published it, and binds. node is the node the token is bound to
// (checkBound), recorded in the binding so that a Node event re-judges the
// session.
func (r *Rules) peerKey(peer, node string, s *Subject) Result {
	raw, ok := r.objects.PeerKey(peer)
	if !ok {
		return Result{Reason: contract.ReasonPeerNotFound, Peer: peer, Node: node}
	}
	key, err := relayproto.ParseKey(raw)
	if err != nil {
		return Result{Reason: contract.ReasonPeerKeyInvalid, Peer: peer, Node: node}
	}
	// ParseKey accepts exactly 44 characters of strict standard base64,
	// the one encoding of a 32-byte key: raw is key.Base64() already,
	// without the two allocations of encoding it again.
	res := Result{Peer: peer, Node: node, Key: key, KeyB64: raw}
	if others := otherHolders(r.objects.PeersWithKey(raw), peer); len(others) > 0 {
		// Any agent may write any WireKubePeer (docs/spec.md#agent): a key in
		// two peers is vouched for by neither, or one node could take over
		// another's relay traffic by copying its key.
		res.Reason, res.Detail = contract.ReasonPeerKeyDuplicate, "key also in WireKubePeer "+strings.Join(others, ",")
		return res
	}
	if r.keyMoved(&res) {
		return res // another, existing WireKubePeer held this key first (internal/keyhistory)
	}
	res.Binding = Of(s, node, peer, key)
	return res
}

// otherHolders returns the peers of holders other than peer, sorted, at
// most 4 (for the log line).
func otherHolders(holders []string, peer string) []string {
	var out []string
	for _, h := range holders {
		if h != peer {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), 4)]
}

// AllowListed applies the --authn-only-path rule: an allowlisted, still
// existing ServiceAccount.
func (r *Rules) AllowListed(s *Subject) contract.Reason {
	sa, ok := ParseUsername(s.Username)
	if !ok || !r.cfg.Allowed[sa] {
		return contract.ReasonIdentityNotAllowed
	}
	if !r.serviceAccountLive(sa, s.UID) {
		return contract.ReasonServiceAccountNotFound
	}
	return ""
}
