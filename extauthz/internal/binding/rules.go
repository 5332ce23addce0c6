// Package binding holds the identity rules of extauthz: which
// ServiceAccounts a path admits, the objects a token is bound to (its Pod and
// Node, checked against the informer caches), the WireKubePeer and public key
// an identity leads to, and the re-judgement of a live binding by those same
// rules. It answers a Result (a reason code, the peer, node and key it bound,
// the binding) and knows nothing of the Authorizer, its headers or its
// signature: extauthz turns a Result into its Decision. Safe for concurrent
// use.
package binding

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/wirekube/relay-ws/extauthz/internal/keyhistory"
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
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

// KeyOwners is what the key history answers (internal/keyhistory, through
// the informers): the owner that forbids key to WireKubePeer peer.
type KeyOwners interface {
	KeyOwner(peer string, key relayproto.Key) (keyhistory.Owner, bool)
}

// ServiceAccount names a ServiceAccount.
type ServiceAccount struct{ Namespace, Name string }

// UsernamePrefix begins the username of a ServiceAccount token.
const UsernamePrefix = revocationhub.ServiceAccountPrefix

// ParseUsername splits system:serviceaccount:<ns>:<name>
// (revocationhub.ServiceAccountOf: the hub indexes bindings by it).
func ParseUsername(u string) (ServiceAccount, bool) {
	ns, name, ok := revocationhub.ServiceAccountOf(u)
	return ServiceAccount{ns, name}, ok
}

// Config is the identities the rules admit, parsed from the flags.
type Config struct {
	// Agents are the agent ServiceAccounts (--agent-service-account): an
	// agent's peer is the node its token is bound to.
	Agents map[ServiceAccount]bool
	// PeerNamespace and PeerPrefix name the per-peer ServiceAccounts
	// (--peer-namespace, --peer-service-account-prefix): <prefix><peer>.
	PeerNamespace, PeerPrefix string
	// Allowed is the allowlist of the authn-only paths
	// (--allow-service-account).
	Allowed map[ServiceAccount]bool
}

// Rules judges identities against cfg and the caches. The zero value is not
// usable: New.
type Rules struct {
	cfg     Config
	objects Objects
	owners  KeyOwners
}

// New returns the rules of cfg over objects. owners may be nil: then no key
// is refused as moved.
func New(cfg Config, objects Objects, owners KeyOwners) *Rules {
	return &Rules{cfg: cfg, objects: objects, owners: owners}
}

// Subject is what TokenReview said of a token, the fields the rules read.
type Subject struct {
	Username, UID     string // the ServiceAccount's username and UID
	PodName, PodUID   string // the Pod the token is bound to, if any
	NodeName, NodeUID string // the Node the token names, if any
}

// Result is the answer of the rules: Reason "" when the identity holds.
// Peer is set once the identity led to a WireKubePeer, Key and KeyB64 once
// that peer's key parsed; on allow Binding is what X-WireKube-Binding holds.
type Result struct {
	Reason contract.Reason
	// Detail says more of a refusal, for the log line only: the other
	// holders of a duplicate key, the first owner of a moved one.
	Detail string
	Peer   string
	// Node is the node the token is bound to (checkBound).
	Node   string
	Key    relayproto.Key
	KeyB64 string // the key as the WireKubePeer holds it; "" until it parsed
	// FirstHolder names the owner of a peer_key_moved key (its WireKubePeer,
	// or while that is gone its Node of the same name).
	FirstHolder string
	Binding     revocation.Binding
}

// Of is the X-WireKube-Binding of an allow answer: the TokenReview fields
// BindPeer read, and the peer and key hash it led to. node is the node
// checkBound resolved: for a Pod-bound token that names no Node (older API
// servers) it is the Pod's node, so that deleting that Node re-judges the
// binding; re-judging it then checks the same Pod-on-Node rule.
func Of(s *Subject, node, peer string, key relayproto.Key) revocation.Binding {
	return revocation.Binding{
		Identity: s.Username, SAUID: s.UID,
		PodName: s.PodName, PodUID: s.PodUID, NodeName: node, NodeUID: s.NodeUID,
		Peer: peer, KeySHA256: revocation.KeyHash(key[:]),
	}
}

func refuse(r contract.Reason) Result { return Result{Reason: r} }
