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
	Audience       string
	IssuedAt       time.Time
	Expiry         time.Time
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
	claims := map[string]any{
		"iss":           Issuer,
		"sub":           "system:serviceaccount:" + o.ServiceAccount.Namespace + ":" + o.ServiceAccount.Name,
		"aud":           []string{o.Audience},
		"iat":           o.IssuedAt.Unix(),
		"nbf":           o.IssuedAt.Unix(),
		"exp":           o.Expiry.Unix(),
		"jti":           rand.Text(),
		"kubernetes.io": k8s,
	}
	return signRS256(c.SAKey, claims)
}

func signRS256(key *rsa.PrivateKey, claims map[string]any) (string, error) {
	header, err := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT"})
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
