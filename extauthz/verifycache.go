package extauthz

import (
	"context"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/wirekube/relay-ws/extauthz/internal/jwks"
	"github.com/wirekube/relay-ws/internal/contract"
)

// verified is the outcome of one signature verification, kept with the
// token's cached review (the cache key is the HMAC of the whole token, so a
// hit is for the very bytes that verified): a cache hit skips the signature
// check while the key that verified it is still published. Immutable.
type verified struct {
	claims *tokenClaims
	key    jwks.Print  // of the key whose signature verified
	state  *jwks.State // the key set it was verified against
}

func newVerified(c *tokenClaims, k *jose.JSONWebKey, st *jwks.State) *verified {
	p, _ := jwks.PrintOf(k) // every key of st has a print (jwks.ParseJWKS)
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
	st := v.keys.Current()
	switch {
	case st == nil:
		return false
	case st == ver.state:
		return true
	}
	return st.Holds(ver.key, ver.claims.Issuer)
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
