package tokenverify

import (
	jose "github.com/go-jose/go-jose/v4"

	"github.com/wirekube/relay-ws/extauthz/internal/jwks"
)

// Verified is the outcome of one signature verification, kept with the
// token's cached review (the cache key is the HMAC of the whole token, so a
// hit is for the very bytes that verified): a cache hit skips the signature
// check while the key that verified it is still published (Holds).
// Immutable.
type Verified struct {
	// Claims are the verified claims; never nil.
	Claims *Claims
	key    jwks.Print  // of the key whose signature verified
	state  *jwks.State // the key set it was verified against
}

func newVerified(c *Claims, k *jose.JSONWebKey, st *jwks.State) *Verified {
	p, _ := jwks.PrintOf(k) // every key of st has a print (jwks.ParseJWKS)
	return &Verified{Claims: c, key: p, state: st}
}

// Identity is the IdentityKey of the verified claims; "" for none.
func (v *Verified) Identity() string {
	if v == nil || v.Claims == nil {
		return ""
	}
	return v.Claims.IdentityKey()
}
