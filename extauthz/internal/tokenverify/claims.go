package tokenverify

import "github.com/go-jose/go-jose/v4/jwt"

// Ref names a bound object in the kubernetes.io claim.
type Ref struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// Claims are the claims of a ServiceAccount token, read only after its
// signature verified (Verifier.Verify).
type Claims struct {
	jwt.Claims
	Kubernetes struct {
		Namespace      string `json:"namespace"`
		ServiceAccount *Ref   `json:"serviceaccount"`
		Pod            *Ref   `json:"pod"`
		Node           *Ref   `json:"node"`
		Secret         *Ref   `json:"secret"`
	} `json:"kubernetes.io"`
}

// SecretBound reports a token bound to a Secret. Such a token is refused on
// the relay path: TokenReview ends it when its Secret is deleted, but
// extauthz cannot see that (it may not read Secrets), so a cached review or
// a live session would outlive the Secret.
func (c *Claims) SecretBound() bool { return c.Kubernetes.Secret != nil }

// IdentityKey names the identity a verified token speaks for, for the
// per-identity share of the review gate: its subject and the Pod (else the
// Node) it is bound to. Agents share one ServiceAccount but each is bound to
// its own Pod, so each agent is an identity of its own; distinct tokens of
// one ServiceAccount and Pod (a node minting tokens for its agent) are one.
func (c *Claims) IdentityKey() string {
	k := c.Kubernetes
	switch {
	case k.Pod != nil:
		return c.Subject + "\x00pod\x00" + k.Pod.Name
	case k.Node != nil:
		return c.Subject + "\x00node\x00" + k.Node.Name
	}
	return c.Subject
}
