// Package tokenverify checks a ServiceAccount token locally, before any
// API call: its signature against the cluster's published keys
// (extauthz/internal/jwks), the names of its claims, and its iss, aud, exp,
// nbf and iat. A Verified remembers which key verified which claims, so a
// cached answer is served again only while that key and issuer still hold.
// It decides nothing: the Authorizer reads the reason and the claims.
package tokenverify

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/wirekube/relay-ws/extauthz/internal/jwks"
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

// Local verification failures, the detail of a refusal for the log line
// only: the answer carries the reason code and nothing about which check
// failed.
const (
	DetailParse      = "parse"       // not a JWS of an allowed algorithm
	DetailNoKeys     = "no_jwks"     // no key set loaded yet
	DetailKidUnknown = "kid_unknown" // no key with that kid, after a refresh
	DetailSignature  = "signature"   // no key verifies the signature
	DetailIssuer     = "issuer"      // iss is not an accepted issuer
	DetailAudience   = "audience"    // aud lacks --audience
	DetailExpired    = "expired"     // exp passed or missing
	DetailNotYet     = "not_yet_valid"
	DetailClaims     = "claims" // claims not decodable, or ambiguous names (checkClaimNames)
)

// Verifier checks a token's signature against the cluster's JWKS and its
// iss, aud, exp, nbf and iat claims, locally: a token that fails costs no
// API call. Safe for concurrent use.
type Verifier struct {
	keys     *jwks.Set
	audience string
	now      func() time.Time
}

// New is a Verifier of tokens for audience against keys, on the clock now.
func New(keys *jwks.Set, audience string, now func() time.Time) *Verifier {
	return &Verifier{keys: keys, audience: audience, now: now}
}

// Verify returns the verified claims and the key that verified them, or a
// deny reason and the failed check (for the log). It fails closed: without a
// key set it answers review_unavailable.
func (v *Verifier) Verify(ctx context.Context, token string) (*Verified, contract.Reason, string) {
	tok, err := jwt.ParseSigned(token, signatureAlgorithms)
	if err != nil || len(tok.Headers) != 1 {
		return nil, contract.ReasonTokenSignatureInvalid, DetailParse
	}
	kid := tok.Headers[0].KeyID
	keys, st, ok := v.keys.KeysFor(kid)
	if !ok {
		return nil, contract.ReasonReviewUnavailable, DetailNoKeys
	}
	if len(keys) == 0 && v.keys.RefreshUnknown(ctx) {
		keys, st, _ = v.keys.KeysFor(kid)
	}
	if len(keys) == 0 {
		return nil, contract.ReasonTokenSignatureInvalid, DetailKidUnknown
	}
	var c Claims
	i, detail := verifyWithAny(tok, keys, &c)
	switch {
	case detail == DetailClaims:
		// Signed, but its claims are ambiguous or do not decode: nothing
		// in it can be read one way only.
		return nil, contract.ReasonTokenMalformed, detail
	case i < 0:
		return nil, contract.ReasonTokenSignatureInvalid, detail
	}
	if reason, detail := v.checkClaims(&c, st.Issuers()); reason != "" {
		if detail == DetailExpired {
			// Signed by the cluster, only too old: its claims still tell
			// which node failed to refresh it (the log line and the Event),
			// never admit anything (the Authorizer stops at the reason).
			return &Verified{Claims: &c}, reason, detail
		}
		return nil, reason, detail
	}
	return newVerified(&c, &keys[i], st), "", ""
}

// Holds reports whether a cached verification stands now: the token has
// not expired (checked on every hit, whatever the cache TTL), and the key
// that verified it and the token's issuer are still in the current key set.
// A refresh that dropped or replaced the key, or the issuer, ends it.
func (v *Verifier) Holds(ver *Verified) bool {
	if ver == nil || ver.Claims.Expiry == nil || !v.now().Before(ver.Claims.Expiry.Time()) {
		return false
	}
	st := v.keys.Current()
	switch {
	case st == nil:
		return false
	case st == ver.state:
		return true
	}
	return st.Holds(ver.key, ver.Claims.Issuer)
}

// verifyWithAny decodes the claims with the first key whose signature
// verifies and returns its index, or -1 and the failed check
// (DetailSignature, DetailClaims). The claims are decoded from the verified
// payload only, after checkClaimNames: encoding/json would otherwise match
// "EXP" to exp, or let a repeated claim override the first. A signature
// that verifies over claims that do not decode is a deny all the same.
func verifyWithAny(tok *jwt.JSONWebToken, keys []jose.JSONWebKey, c *Claims) (int, string) {
	for i := range keys {
		var payload json.RawMessage
		if err := tok.Claims(keys[i].Key, &payload); err != nil {
			continue
		}
		if checkClaimNames(payload) != nil || json.Unmarshal(payload, c) != nil {
			*c = Claims{}
			return -1, DetailClaims
		}
		return i, ""
	}
	return -1, DetailSignature
}

func (v *Verifier) checkClaims(c *Claims, issuers []string) (contract.Reason, string) {
	now := v.now()
	switch {
	case !slices.Contains(issuers, c.Issuer):
		return contract.ReasonTokenInvalid, DetailIssuer
	case !c.Audience.Contains(v.audience):
		return contract.ReasonAudienceMismatch, DetailAudience
	case c.Expiry == nil || !now.Before(c.Expiry.Time()):
		return contract.ReasonTokenInvalid, DetailExpired
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Time: now}, clockLeeway); err != nil {
		return contract.ReasonTokenInvalid, DetailNotYet
	}
	return "", ""
}
