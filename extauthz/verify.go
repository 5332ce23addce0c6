package extauthz

import (
	"context"
	"encoding/json"
	"github.com/wirekube/relay-ws/extauthz/internal/jwks"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/wirekube/relay-ws/internal/contract"
)

// signatureAlgorithms are the JWS algorithms kube-apiserver signs
// ServiceAccount tokens with (RSA or ECDSA keys). Anything else, "none" and
// the HMAC family included, fails to parse.
var signatureAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512,
}

// clockLeeway tolerates clock skew between this host and the API server on
// nbf and iat, so a token minted a moment ago verifies. exp gets none: an
// expired token is of no use to the bridge, which ends the session at exp.
const clockLeeway = time.Minute

// Local verification failures, for the log line only: the answer carries
// the reason code and nothing about which check failed.
const (
	verifyParse     = "parse"       // not a JWS of an allowed algorithm
	verifyNoKeys    = "no_jwks"     // no key set loaded yet
	verifyKidUnkown = "kid_unknown" // no key with that kid, after a refresh
	verifySignature = "signature"   // no key verifies the signature
	verifyIssuer    = "issuer"      // iss is not an accepted issuer
	verifyAudience  = "audience"    // aud lacks --audience
	verifyExpired   = "expired"     // exp passed or missing
	verifyNotYet    = "not_yet_valid"
	verifyClaims    = "claims" // claims not decodable, or ambiguous names (checkClaimNames)
)

// ref names a bound object in the kubernetes.io claim.
type ref struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// tokenClaims are the claims of a ServiceAccount token, read only after its
// signature verified.
type tokenClaims struct {
	jwt.Claims
	Kubernetes struct {
		Namespace      string `json:"namespace"`
		ServiceAccount *ref   `json:"serviceaccount"`
		Pod            *ref   `json:"pod"`
		Node           *ref   `json:"node"`
		Secret         *ref   `json:"secret"`
	} `json:"kubernetes.io"`
}

// verifier checks a token's signature against the cluster's JWKS and its
// iss, aud, exp, nbf and iat claims, locally: a token that fails costs no
// API call. Safe for concurrent use.
type verifier struct {
	keys     *jwks.Set
	audience string
	now      func() time.Time
}

// verify returns the verified claims and the key that verified them, or a
// deny reason and the failed check (for the log). It fails closed: without a
// key set it answers review_unavailable.
func (v *verifier) verify(ctx context.Context, token string) (*verified, contract.Reason, string) {
	tok, err := jwt.ParseSigned(token, signatureAlgorithms)
	if err != nil || len(tok.Headers) != 1 {
		return nil, contract.ReasonTokenSignatureInvalid, verifyParse
	}
	kid := tok.Headers[0].KeyID
	keys, st, ok := v.keys.KeysFor(kid)
	if !ok {
		return nil, contract.ReasonReviewUnavailable, verifyNoKeys
	}
	if len(keys) == 0 && v.keys.RefreshUnknown(ctx) {
		keys, st, _ = v.keys.KeysFor(kid)
	}
	if len(keys) == 0 {
		return nil, contract.ReasonTokenSignatureInvalid, verifyKidUnkown
	}
	var c tokenClaims
	i, detail := verifyWithAny(tok, keys, &c)
	switch {
	case detail == verifyClaims:
		// Signed, but its claims are ambiguous or do not decode: nothing
		// in it can be read one way only.
		return nil, contract.ReasonTokenMalformed, detail
	case i < 0:
		return nil, contract.ReasonTokenSignatureInvalid, detail
	}
	if reason, detail := v.checkClaims(&c, st.Issuers()); reason != "" {
		if detail == verifyExpired {
			// Signed by the cluster, only too old: its claims still tell
			// which node failed to refresh it (the log line and the Event),
			// never admit anything (decide stops at the reason).
			return &verified{claims: &c}, reason, detail
		}
		return nil, reason, detail
	}
	return newVerified(&c, &keys[i], st), "", ""
}

// verifyWithAny decodes the claims with the first key whose signature
// verifies and returns its index, or -1 and the failed check
// (verifySignature, verifyClaims). The claims are decoded from the verified
// payload only, after checkClaimNames: encoding/json would otherwise match
// "EXP" to exp, or let a repeated claim override the first. A signature
// that verifies over claims that do not decode is a deny all the same.
func verifyWithAny(tok *jwt.JSONWebToken, keys []jose.JSONWebKey, c *tokenClaims) (int, string) {
	for i := range keys {
		var payload json.RawMessage
		if err := tok.Claims(keys[i].Key, &payload); err != nil {
			continue
		}
		if checkClaimNames(payload) != nil || json.Unmarshal(payload, c) != nil {
			*c = tokenClaims{}
			return -1, verifyClaims
		}
		return i, ""
	}
	return -1, verifySignature
}

func (v *verifier) checkClaims(c *tokenClaims, issuers []string) (contract.Reason, string) {
	now := v.now()
	switch {
	case !slices.Contains(issuers, c.Issuer):
		return contract.ReasonTokenInvalid, verifyIssuer
	case !c.Audience.Contains(v.audience):
		return contract.ReasonAudienceMismatch, verifyAudience
	case c.Expiry == nil || !now.Before(c.Expiry.Time()):
		return contract.ReasonTokenInvalid, verifyExpired
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Time: now}, clockLeeway); err != nil {
		return contract.ReasonTokenInvalid, verifyNotYet
	}
	return "", ""
}

// offlineReview is the TokenReview answer kube-apiserver would give for
// verified claims, built locally for --on-review-unavailable=verify-offline.
// ok is false for a token whose binding cannot be checked from the
// informers (a Secret-bound token, a subject that is not its
// ServiceAccount): such a token is never admitted offline.
func (c *tokenClaims) offlineReview(audience string) (review, bool) {
	k := c.Kubernetes
	if k.Namespace == "" || k.ServiceAccount == nil || k.ServiceAccount.Name == "" || k.Secret != nil {
		return review{}, false
	}
	rv := review{
		authenticated: true,
		audiences:     []string{audience},
		username:      saUserPrefix + k.Namespace + ":" + k.ServiceAccount.Name,
		uid:           k.ServiceAccount.UID,
	}
	if c.Subject != rv.username {
		return review{}, false
	}
	if k.Pod != nil {
		rv.podName, rv.podUID = k.Pod.Name, k.Pod.UID
	}
	if k.Node != nil {
		rv.nodeName, rv.nodeUID = k.Node.Name, k.Node.UID
	}
	return rv, true
}
