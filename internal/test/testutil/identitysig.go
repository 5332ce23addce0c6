package testutil

import (
	"crypto/ed25519"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/identitysig"
)

// SigningKey is a deterministic Ed25519 key standing in for extauthz's.
func SigningKey(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b ^ byte(i)
	}
	return ed25519.NewKeyFromSeed(seed)
}

// PublishKeys writes the public halves of privs as extauthz would and
// returns the file.
func PublishKeys(t testing.TB, privs ...ed25519.PrivateKey) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "identity-keys")
	var pubs []ed25519.PublicKey
	for _, p := range privs {
		pubs = append(pubs, p.Public().(ed25519.PublicKey))
	}
	if err := identitysig.WritePublicKeys(path, pubs); err != nil {
		t.Fatal(err)
	}
	return path
}

// SignHeaders adds the signature of key (its clock at) over hdr's
// identity headers, as extauthz's answer carries it.
func SignHeaders(hdr http.Header, key ed25519.PrivateKey, at time.Time) http.Header {
	s := identitysig.NewSigner(key, func() time.Time { return at })
	hdr.Set(contract.HeaderSignature, s.Sign(identitysig.Fields{Peer: hdr.Get(contract.HeaderPeer),
		PublicKey: hdr.Get(contract.HeaderPublicKey), Identity: hdr.Get(contract.HeaderIdentity),
		TokenExpires: hdr.Get(contract.HeaderTokenExpires), Binding: hdr.Get(contract.HeaderBinding),
		ClientAddress: hdr.Get(contract.HeaderClientAddress)}))
	return hdr
}
