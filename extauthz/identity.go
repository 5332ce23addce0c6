package extauthz

import (
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenreview"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// Objects answers the identity lookups from local caches (informers), never
// from an API call per check. Implementations must be safe for concurrent
// use and must not let callers mutate what they return.
type Objects interface {
	Pod(namespace, name string) (*corev1.Pod, bool)
	ServiceAccount(namespace, name string) (*corev1.ServiceAccount, bool)
	Node(name string) (*corev1.Node, bool)
	// PeerKey returns spec.publicKey of the WireKubePeer named name.
	PeerKey(name string) (string, bool)
	// PeersWithKey returns the names of the WireKubePeers whose
	// spec.publicKey is key (std base64 of 32 bytes, canonical form).
	PeersWithKey(key string) []string
}

const saUserPrefix = revocationhub.ServiceAccountPrefix

// parseSAUsername splits system:serviceaccount:<ns>:<name>
// (revocationhub.ServiceAccountOf: the hub indexes bindings by it).
func parseSAUsername(u string) (nsName, bool) {
	ns, name, ok := revocationhub.ServiceAccountOf(u)
	return nsName{ns, name}, ok
}

// serviceAccountLive checks that the ServiceAccount still exists with the UID
// TokenReview reported, so deleting (or recreating) it revokes at once.
func (a *Authorizer) serviceAccountLive(sa nsName, uid string) bool {
	obj, ok := a.objects.ServiceAccount(sa.ns, sa.name)
	return ok && uid != "" && string(obj.UID) == uid
}

// bindPeer applies the identity rules of the relay path and, on success,
// returns the allow decision with the identity headers. The Pod and Node
// rules (checkBound) run for every identity whose token names a Pod or a
// Node, the per-peer ServiceAccounts included: a bound token is worth no
// more than its bound object (docs/revocation.md#identities).
func (a *Authorizer) bindPeer(rv *tokenreview.Answer, exp time.Time) Decision {
	sa, ok := parseSAUsername(rv.Username)
	if !ok {
		return deny(contract.ReasonIdentityNotAllowed)
	}
	isAgent := a.cfg.agentSAs[sa]
	var peer string
	switch {
	case isAgent:
	case sa.ns == a.cfg.peerNamespace && strings.HasPrefix(sa.name, a.cfg.peerPrefix):
		peer = strings.TrimPrefix(sa.name, a.cfg.peerPrefix)
		if peer == "" {
			return deny(contract.ReasonIdentityNotAllowed)
		}
	default:
		return deny(contract.ReasonIdentityNotAllowed)
	}
	if !a.serviceAccountLive(sa, rv.UID) {
		return deny(contract.ReasonServiceAccountNotFound)
	}
	node, reason := a.checkBound(sa, rv)
	if reason != "" {
		return deny(reason)
	}
	if isAgent {
		// An agent's peer is the node its token is bound to.
		if node == "" {
			return deny(contract.ReasonTokenNotBound)
		}
		peer = node
	}
	return a.peerDecision(peer, node, rv, exp)
}

// checkBound checks the objects a token is bound to against the informers:
// the Pod (same UID, running under the token's ServiceAccount, not
// Succeeded or Failed, scheduled, on the Node the token names) and the Node
// (existing, with the UID the token names). It returns the node the token
// is bound to: the Pod's node for a Pod-bound token, the Node of a
// Node-bound token, "" for an unbound token.
func (a *Authorizer) checkBound(sa nsName, rv *tokenreview.Answer) (string, contract.Reason) {
	switch {
	case rv.PodName != "":
		pod, ok := a.objects.Pod(sa.ns, rv.PodName)
		switch {
		case !ok:
			return "", contract.ReasonPodNotFound
		case rv.PodUID == "" || string(pod.UID) != rv.PodUID:
			return "", contract.ReasonPodUIDMismatch
		case pod.Spec.ServiceAccountName != sa.name:
			return "", contract.ReasonPodServiceAccountMismatch
		case podTerminated(pod):
			return "", contract.ReasonPodTerminated
		case pod.Spec.NodeName == "":
			return "", contract.ReasonPodNotScheduled
		case rv.NodeName != "" && pod.Spec.NodeName != rv.NodeName:
			return "", contract.ReasonNodeMismatch
		}
		// The Pod's Node must exist too: deleting a Node ends the Pod-bound
		// sessions on it (the Pod object may outlive it for a while).
		return pod.Spec.NodeName, a.checkNode(pod.Spec.NodeName, rv.NodeUID)
	case rv.NodeName != "":
		return rv.NodeName, a.checkNode(rv.NodeName, rv.NodeUID)
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
func (a *Authorizer) checkNode(name, uid string) contract.Reason {
	node, ok := a.objects.Node(name)
	if !ok || (uid != "" && node.UID != types.UID(uid)) {
		return contract.ReasonNodeMismatch
	}
	return ""
}

// peerDecision looks up the peer's key and builds the allow answer.
// node is the node the token is bound to (checkBound), recorded in the
// binding so that a Node event re-judges the session.
func (a *Authorizer) peerDecision(peer, node string, rv *tokenreview.Answer, exp time.Time) Decision {
	raw, ok := a.objects.PeerKey(peer)
	if !ok {
		return Decision{Reason: contract.ReasonPeerNotFound, Peer: peer}
	}
	key, err := relayproto.ParseKey(raw)
	if err != nil {
		return Decision{Reason: contract.ReasonPeerKeyInvalid, Peer: peer}
	}
	// ParseKey accepts exactly 44 characters of strict standard base64,
	// the one encoding of a 32-byte key: raw is key.Base64() already,
	// without the two allocations of encoding it again.
	keyB64 := raw
	if others := otherHolders(a.objects.PeersWithKey(keyB64), peer); len(others) > 0 {
		// Any agent may write any WireKubePeer (docs/spec.md#agent): a key in
		// two peers is vouched for by neither, or one node could take over
		// another's relay traffic by copying its key.
		return Decision{Reason: contract.ReasonPeerKeyDuplicate, Peer: peer, KeyFingerprint: key.Fingerprint(),
			Detail: "key also in WireKubePeer " + strings.Join(others, ",")}
	}
	if d, moved := a.keyMoved(peer, key); moved {
		return d // another, existing WireKubePeer held this key first (internal/keyhistory)
	}
	b := bindingOf(rv, node, peer, key)
	hs := append(make([]Header, 0, 5+signedHeaders),
		Header{contract.HeaderPeer, peer},
		Header{contract.HeaderPublicKey, keyB64},
		Header{contract.HeaderIdentity, rv.Username},
		Header{contract.HeaderTokenExpires, exp.UTC().Format(time.RFC3339)},
		Header{contract.HeaderBinding, b.Format()})
	return Decision{
		Peer:           peer,
		KeyFingerprint: key.Fingerprint(),
		Headers:        hs,
		binding:        b,
		signRoom:       true,
	}
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

// allowListed applies the --authn-only-path rule: an allowlisted, still
// existing ServiceAccount; only X-WireKube-Identity is set.
func (a *Authorizer) allowListed(rv *tokenreview.Answer) Decision {
	sa, ok := parseSAUsername(rv.Username)
	if !ok || !a.cfg.allowSAs[sa] {
		return deny(contract.ReasonIdentityNotAllowed)
	}
	if !a.serviceAccountLive(sa, rv.UID) {
		return deny(contract.ReasonServiceAccountNotFound)
	}
	return Decision{Headers: []Header{{contract.HeaderIdentity, rv.Username}}}
}
