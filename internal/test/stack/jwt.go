package stack

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// SignedTokenOptions describe a token the suite signs itself with the
// cluster's ServiceAccount key, in the shape kube-apiserver issues.
type SignedTokenOptions struct {
	ServiceAccount *corev1.ServiceAccount
	Pod            *corev1.Pod // optional binding
	// Node adds the node claim kube-apiserver puts in a Pod-bound token
	// of a scheduled Pod (name and UID).
	Node     *corev1.Node
	Audience string
	IssuedAt time.Time
	Expiry   time.Time
	// Issuer overrides the cluster's issuer (a token of another issuer).
	Issuer string
	// Key signs instead of the cluster's current key (a token of a key the
	// cluster does not know). The kid is always the signing key's.
	Key *rsa.PrivateKey
}

// SignToken signs a ServiceAccount JWT. The API server accepts it exactly as
// one of its own, so an expiry in the past gives a real expired token (the
// TokenRequest API refuses durations under 10 minutes).
func (c *Cluster) SignToken(o SignedTokenOptions) (string, error) {
	k8s := map[string]any{
		"namespace":      o.ServiceAccount.Namespace,
		"serviceaccount": map[string]any{"name": o.ServiceAccount.Name, "uid": string(o.ServiceAccount.UID)},
	}
	if o.Pod != nil {
		k8s["pod"] = map[string]any{"name": o.Pod.Name, "uid": string(o.Pod.UID)}
	}
	if o.Node != nil {
		k8s["node"] = map[string]any{"name": o.Node.Name, "uid": string(o.Node.UID)}
	}
	iss, key := Issuer, c.SAKey
	if o.Issuer != "" {
		iss = o.Issuer
	}
	if o.Key != nil {
		key = o.Key
	}
	claims := map[string]any{
		"iss":           iss,
		"sub":           "system:serviceaccount:" + o.ServiceAccount.Namespace + ":" + o.ServiceAccount.Name,
		"aud":           []string{o.Audience},
		"iat":           o.IssuedAt.Unix(),
		"nbf":           o.IssuedAt.Unix(),
		"exp":           o.Expiry.Unix(),
		"jti":           rand.Text(),
		"kubernetes.io": k8s,
	}
	return signRS256(key, claims)
}

func signRS256(key *rsa.PrivateKey, claims map[string]any) (string, error) {
	kid, err := KeyID(&key.PublicKey)
	if err != nil {
		return "", err
	}
	header, err := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid})
	if err != nil {
		return "", fmt.Errorf("jwt header: %w", err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("jwt claims: %w", err)
	}
	enc := base64.RawURLEncoding
	signingInput := enc.EncodeToString(header) + "." + enc.EncodeToString(payload)
	sum := sha256.Sum256([]byte(signingInput))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("jwt sign: %w", err)
	}
	return signingInput + "." + enc.EncodeToString(sig), nil
}
