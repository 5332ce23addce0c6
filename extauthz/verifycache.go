package extauthz

import (
	"context"
	"crypto"
	"crypto/sha256"
	"slices"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/wirekube/relay-ws/internal/contract"
)

// keyPrint names one verification key: its kid and its RFC 7638 SHA-256
// thumbprint (the public key material), so a kid that now names another key
// is a different keyPrint.
type keyPrint struct {
	kid   string
	thumb [sha256.Size]byte
}

func printOf(k *jose.JSONWebKey) (keyPrint, bool) {
	t, err := k.Thumbprint(crypto.SHA256)
	if err != nil || len(t) != sha256.Size {
		return keyPrint{}, false
	}
	p := keyPrint{kid: k.KeyID}
	copy(p.thumb[:], t)
	return p, true
}

// verified is the outcome of one signature verification, kept with the
// token's cached review (the cache key is the HMAC of the whole token, so a
// hit is for the very bytes that verified): a cache hit skips the signature
// check while the key that verified it is still published. Immutable.
type verified struct {
	claims *tokenClaims
	key    keyPrint  // of the key whose signature verified
	state  *keyState // the key set it was verified against
}

func newVerified(c *tokenClaims, k *jose.JSONWebKey, st *keyState) *verified {
	p, _ := printOf(k) // every key of st has a print (parseJWKS)
	return &verified{claims: c, key: p, state: st}
}

// holds reports whether a cached verification stands now: the token has
// not expired (checked on every hit, whatever the cache TTL), and the key
// that verified it and the token's issuer are still in the current key set.
// A refresh that dropped or replaced the key, or the issuer, ends it.
func (v *verifier) holds(ver *verified) bool {
	if ver == nil || ver.claims.Expiry == nil || !v.now().Before(ver.claims.Expiry.Time()) {
		return false
	}
	st := v.keys.state.Load()
	switch {
	case st == nil:
		return false
	case st == ver.state:
		return true
	}
	return st.prints[ver.key] && slices.Contains(st.issuers, ver.claims.Issuer)
}

// verifyAgain verifies token in full: it has no cached verification that
// still holds (holds). A cached answer (inCache) whose verification no longer
// holds and whose token fails again is dropped from the cache, so it can
// never be served.
func (a *Authorizer) verifyAgain(ctx context.Context, k cacheKey, token string, inCache bool) (*verified, contract.Reason, string) {
	ver, reason, detail := a.verifier.verify(ctx, token)
	if reason != "" && inCache {
		a.reviewer.cache.Remove(k)
	}
	return ver, reason, detail
}
