package jwks

import (
	"crypto"
	"crypto/sha256"

	jose "github.com/go-jose/go-jose/v4"
)

// Print names one verification key: its kid and its RFC 7638 SHA-256
// thumbprint (the public key material), so a kid that now names another key
// is a different Print.
type Print struct {
	kid   string
	thumb [sha256.Size]byte
}

// PrintOf is k's Print; ok is false for a key without a thumbprint.
func PrintOf(k *jose.JSONWebKey) (Print, bool) {
	t, err := k.Thumbprint(crypto.SHA256)
	if err != nil || len(t) != sha256.Size {
		return Print{}, false
	}
	p := Print{kid: k.KeyID}
	copy(p.thumb[:], t)
	return p, true
}
