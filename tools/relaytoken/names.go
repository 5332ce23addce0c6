// Package relaytoken is wirekube-relay-token: it issues, lists and revokes
// per-peer relay tokens for agents outside the DaemonSet flow. Each peer gets
// a dedicated ServiceAccount wirekube-relay-peer-<peer>; a token is requested
// with the TokenRequest API (audience wirekube-relay) and stored in a Secret
// usable as authSecretRef, or in a file with mode 0600, or printed.
// Revoking deletes the ServiceAccount and its Secrets, so TokenReview (and
// with it the gateway) refuses every token it issued.
//
// Tokens are never logged: only the chosen destination receives one.
package relaytoken

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Names and labels this tool writes; they are its contract with the
// cluster (docs/tools.md).
const (
	// ServiceAccountPrefix + peer name is the dedicated ServiceAccount.
	ServiceAccountPrefix = "wirekube-relay-peer-"
	// LabelManagedBy marks every object this tool creates.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "wirekube-relay-token"
	// LabelPeer names the WireKubePeer, when the name fits in a label value
	// (63 characters); AnnotationPeer always does and is authoritative.
	LabelPeer      = "relay.wirekube.io/peer"
	AnnotationPeer = "relay.wirekube.io/peer"
	// AnnotationExpires on a Secret is the token's expiry, RFC 3339 UTC.
	AnnotationExpires = "relay.wirekube.io/token-expires"
	// AnnotationServiceAccount on a Secret names the token's ServiceAccount.
	AnnotationServiceAccount = "relay.wirekube.io/service-account"
	// SecretTokenKey is the Secret data key holding the token.
	SecretTokenKey = "token"

	DefaultNamespace = "wirekube-system"
	DefaultDuration  = time.Hour
	// MinDuration is the shortest token kube-apiserver issues.
	MinDuration = 10 * time.Minute
)

// PeerResource is the cluster-scoped WireKubePeer resource.
var PeerResource = schema.GroupVersionResource{Group: "wirekube.io", Version: "v1alpha1", Resource: "wirekubepeers"}

// Sentinel errors; each is wrapped with the details.
var (
	ErrUsage         = errors.New("usage")
	ErrInvalidPeer   = errors.New("invalid peer name")
	ErrPeerNotFound  = errors.New("WireKubePeer not found")
	ErrForbidden     = errors.New("forbidden")
	ErrNamespace     = errors.New("namespace not found")
	ErrNotManaged    = errors.New("object not managed by wirekube-relay-token")
	ErrNothingToDrop = errors.New("nothing to revoke")
)

// ServiceAccountName is the dedicated ServiceAccount of a peer.
func ServiceAccountName(peer string) string { return ServiceAccountPrefix + peer }

// ValidatePeer checks that peer is a WireKubePeer name (a DNS-1123
// subdomain) short enough for its ServiceAccount name (253 characters).
func ValidatePeer(peer string) error {
	if peer == "" {
		return fmt.Errorf("%w: --peer is required", ErrInvalidPeer)
	}
	if errs := validation.IsDNS1123Subdomain(peer); len(errs) > 0 {
		return fmt.Errorf("%w: --peer %q: %s", ErrInvalidPeer, peer, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(ServiceAccountName(peer)); len(errs) > 0 {
		return fmt.Errorf("%w: --peer %q: ServiceAccount name %s: %s", ErrInvalidPeer, peer,
			ServiceAccountName(peer), strings.Join(errs, "; "))
	}
	return nil
}

// managedLabels are the labels of a managed ServiceAccount or Secret.
func managedLabels(peer string) map[string]string {
	l := map[string]string{LabelManagedBy: ManagedByValue}
	if len(validation.IsValidLabelValue(peer)) == 0 {
		l[LabelPeer] = peer
	}
	return l
}

func isManaged(labels map[string]string) bool { return labels[LabelManagedBy] == ManagedByValue }

// managedSelector selects every object this tool manages.
const managedSelector = LabelManagedBy + "=" + ManagedByValue
