package revocationhub

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/wirekube/relay-ws/internal/revocation"
)

// ServiceAccountPrefix begins the username of a ServiceAccount token.
const ServiceAccountPrefix = "system:serviceaccount:"

// ServiceAccountOf splits system:serviceaccount:<ns>:<name>; ok is false
// for any other username.
func ServiceAccountOf(u string) (ns, name string, ok bool) {
	rest, ok := strings.CutPrefix(u, ServiceAccountPrefix)
	if !ok {
		return "", "", false
	}
	ns, name, ok = strings.Cut(rest, ":")
	if !ok || ns == "" || name == "" || strings.Contains(name, ":") {
		return "", "", false
	}
	return ns, name, true
}

// BindingKeys are the informer keys whose change can end binding b (see
// ObjectKey): its ServiceAccount, Pod, Node and WireKubePeer.
func BindingKeys(b revocation.Binding) []string {
	keys := make([]string, 0, 5)
	if ns, name, ok := ServiceAccountOf(b.Identity); ok {
		keys = append(keys, ObjectKey(KindSA, ns, name))
		if b.PodName != "" {
			keys = append(keys, ObjectKey(KindPod, ns, b.PodName))
		}
	}
	if b.NodeName != "" {
		keys = append(keys, ObjectKey(KindNode, "", b.NodeName))
	}
	// The key too: another WireKubePeer taking this key (peer_key_duplicate)
	// changes no object the binding names.
	return append(keys, ObjectKey(KindPeer, "", b.Peer), KeyHashKey(b.KeySHA256))
}

// KeyHashKey is the revocation index key of a public key, by its SHA-256 as a
// binding holds it.
func KeyHashKey(h [sha256.Size]byte) string { return ObjectKey(KindKey, "", hex.EncodeToString(h[:])) }

// Object kinds of the revocation index.
const (
	KindPod  = "pod"
	KindSA   = "sa"
	KindNode = "node"
	KindPeer = "peer"
	KindKey  = "key" // a public key held by a WireKubePeer
)

// ObjectKey names one watched object in the revocation index.
func ObjectKey(kind, ns, name string) string { return kind + "/" + ns + "/" + name }
