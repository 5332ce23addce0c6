package extauthz

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/wirekube/relay-ws/internal/contract"
)

// MaxTokenLength bounds a bearer token before anything else looks at it.
// Kubernetes ServiceAccount tokens are about 1 KiB; 8 KiB leaves room for
// large extra claims while keeping an attacker from making us hash or decode
// megabytes per request.
const MaxTokenLength = 8192

// minTokenLength rejects tokens too short to be a signed JWT.
const minTokenLength = 16

// parseAuthorization checks that exactly one Authorization value was sent and
// that it is "Bearer <JWT-shaped token>" (scheme in any case). values holds
// every Authorization value the proxy passed, one element per header line.
// A comma inside a value means the proxy joined repeated headers: a comma
// cannot occur in a JWT, so it is treated as a repeated header too.
func parseAuthorization(values []string) (string, contract.Reason) {
	switch {
	case len(values) == 0:
		return "", contract.ReasonTokenMissing
	case len(values) > 1 || strings.Contains(values[0], ","):
		return "", contract.ReasonAuthorizationRepeated
	}
	v := strings.TrimSpace(values[0])
	if v == "" {
		return "", contract.ReasonTokenMissing
	}
	if strings.EqualFold(v, "Bearer") {
		return "", contract.ReasonTokenMissing
	}
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", contract.ReasonTokenMalformed
	}
	token = strings.TrimLeft(token, " ")
	if token == "" {
		return "", contract.ReasonTokenMissing
	}
	if !isJWTShape(token) {
		return "", contract.ReasonTokenMalformed
	}
	return token, ""
}

// isJWTShape reports whether s looks like a compact JWS: three non-empty
// base64url segments separated by dots, of sane length. It says nothing about
// validity: only TokenReview decides that.
func isJWTShape(s string) bool {
	if len(s) < minTokenLength || len(s) > MaxTokenLength {
		return false
	}
	dots := 0
	segStart := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			if i == segStart {
				return false
			}
			dots++
			segStart = i + 1
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return dots == 2 && segStart < len(s)
}

var errNoExp = errors.New("token has no exp claim")

// checkPayload refuses, before any signature check or API call, a payload
// that could not be a ServiceAccount token's: not base64url JSON, or no
// numeric exp. It reads no value the gateway acts on: the expiry, the
// identity and the bound objects come from the verified claims only, whose
// names the token verifier checks (extauthz/internal/tokenverify). It runs on every check
// whose token has no cached verification that still holds (a held one is of
// the same bytes, which passed it before): a cache hit skips it.
func checkPayload(token string) error {
	raw, err := payloadBytes(token)
	if err != nil {
		return err
	}
	var claims struct {
		Exp json.RawMessage `json:"exp"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return errors.New("token payload: bad json")
	}
	if len(claims.Exp) == 0 {
		return errNoExp
	}
	// A JSON number only: ParseFloat refuses the quotes of a string.
	f, err := strconv.ParseFloat(string(claims.Exp), 64)
	if err != nil || f <= 0 || f > 1e11 {
		return errors.New("token payload: exp out of range")
	}
	return nil
}

// payloadBytes decodes the payload segment of a JWT-shaped token. Nothing
// here checks the signature.
func payloadBytes(token string) ([]byte, error) {
	_, rest, _ := strings.Cut(token, ".")
	payload, _, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, errors.New("token payload: not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(payload, "="))
	if err != nil {
		return nil, errors.New("token payload: bad base64url")
	}
	return raw, nil
}

// unverifiedClaims decodes the payload segment of a JWT-shaped token into v.
// Nothing here checks the signature: callers must trust the result for
// nothing that grants access.
func unverifiedClaims(token string, v any) error {
	raw, err := payloadBytes(token)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return errors.New("token payload: bad json")
	}
	return nil
}

// claimsOtherAudience reports whether the token's payload has an aud claim
// (a string or an array of strings, RFC 7519 section 4.1.3) that does not
// contain audience. A missing or unreadable aud claim reports false.
//
// The payload is NOT verified. The answer is trusted for one thing only:
// choosing which 401 reason to show (audience_mismatch instead of
// token_invalid) for a token that TokenReview has already rejected, so an
// operator learns to reissue it with the right audience. It never allows a
// request, never changes a status code, and is never cached.
func claimsOtherAudience(token, audience string) bool {
	// A map, not a struct: claim names are case-sensitive, and a struct
	// would also match "AUD".
	var claims map[string]json.RawMessage
	if unverifiedClaims(token, &claims) != nil {
		return false
	}
	aud := claims["aud"]
	if len(aud) == 0 || string(aud) == "null" {
		return false
	}
	var one string
	if json.Unmarshal(aud, &one) == nil {
		return one != audience
	}
	var many []string
	if json.Unmarshal(aud, &many) == nil {
		return !slices.Contains(many, audience)
	}
	return false // null, a number, an object: no audience to compare
}
