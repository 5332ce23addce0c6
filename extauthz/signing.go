package extauthz

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/wirekube/relay-ws/internal/clientaddr"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/identitysig"
)

// signingReloadInterval is how often the key files are re-read when set
// (a mounted Secret changes in place; kubelet's own sync takes up to about
// a minute more).
const signingReloadInterval = 10 * time.Second

// maxPEMFileLen bounds a key file read.
const maxPEMFileLen = 64 << 10

// keyring is the loaded signing state: the signer and every public key
// published beside its own, or the per-start MAC key.
type keyring struct {
	signer    *identitysig.Signer
	published []ed25519.PublicKey
	mac       []byte // the per-start MAC key; nil with a signing key file
}

// loadKeyring reads the key files; without a signing key file it makes a
// fresh MAC key: only the bridge of this Pod, which reads it from the
// directory the two share, verifies what this extauthz answers, so a
// keyed MAC proves as much as a signature at a fraction of its cost
// (docs/revocation.md#signing).
func loadKeyring(o SigningOptions) (*keyring, error) {
	if o.IdentitySigningKeyFile == "" {
		key := identitysig.NewMACKey()
		return &keyring{signer: identitysig.NewMACSigner(key, nil), mac: key}, nil
	}
	privs, pubs, err := readPEMKeys("identity-signing-key-file", o.IdentitySigningKeyFile)
	if err != nil {
		return nil, err
	}
	if len(privs) != 1 || len(pubs) != 1 {
		return nil, fmt.Errorf("--identity-signing-key-file: want exactly one PRIVATE KEY block, got %d keys", len(pubs))
	}
	kr := &keyring{signer: identitysig.NewSigner(privs[0], nil), published: pubs}
	if o.IdentityAcceptedKeysFile != "" {
		_, more, err := readPEMKeys("identity-accepted-keys-file", o.IdentityAcceptedKeysFile)
		// A missing file adds no key: the bridge then accepts fewer
		// signatures, never more. Any other error keeps failing.
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		for _, k := range more {
			if !slices.ContainsFunc(kr.published, func(p ed25519.PublicKey) bool { return p.Equal(k) }) {
				kr.published = append(kr.published, k)
			}
		}
	}
	if len(kr.published) > identitysig.MaxPublicKeys {
		return nil, fmt.Errorf("--identity-accepted-keys-file: at most %d keys in all, got %d", identitysig.MaxPublicKeys, len(kr.published))
	}
	return kr, nil
}

func readPEMKeys(flagName, path string) ([]ed25519.PrivateKey, []ed25519.PublicKey, error) {
	b, err := identitysig.ReadFileBounded(path, maxPEMFileLen)
	if err != nil {
		return nil, nil, fmt.Errorf("--%s: %w", flagName, err)
	}
	privs, pubs, err := identitysig.ParsePEMKeys(b)
	if err != nil {
		return nil, nil, fmt.Errorf("--%s: %w", flagName, err)
	}
	return privs, pubs, nil
}

// same reports whether two keyrings sign with the same key and publish the
// same keys.
func (k *keyring) same(o *keyring) bool {
	return k.signer.KeyID() == o.signer.KeyID() && slices.EqualFunc(k.published, o.published,
		func(a, b ed25519.PublicKey) bool { return bytes.Equal(a, b) })
}

// fingerprints are the key ids, for the log line (never the keys).
func (k *keyring) fingerprints() []string {
	ids := make([]string, 0, len(k.published)+1)
	for _, p := range k.published {
		ids = append(ids, identitysig.KeyID(p))
	}
	if k.mac != nil {
		ids = append(ids, identitysig.MACKeyID(k.mac))
	}
	return ids
}

// signedHeaders is how many headers sign appends at most.
const signedHeaders = 2

// identitySigner signs the relay allows of an Authorizer. The zero value
// signs nothing; NewAuthorizer installs a per-start key so that an
// Authorizer never answers an allow the bridge would refuse as unsigned.
type identitySigner struct {
	cur atomic.Pointer[identitysig.Signer]
}

// sign adds X-WireKube-Client-Address (client, as Authorizer.clientAddress
// read it) and X-WireKube-Signature over it and the identity headers to a
// relay allow (one that carries X-WireKube-Peer) and to the bounce answer
// (over its binding alone, steer.go); other decisions are returned as they
// are.
func (s *identitySigner) sign(d Decision, client string) Decision {
	signer := s.cur.Load()
	if !d.Allowed() || signer == nil {
		return d
	}
	var f identitysig.Fields
	for _, h := range d.Headers {
		switch h.Name {
		case contract.HeaderPeer:
			f.Peer = h.Value
		case contract.HeaderPublicKey:
			f.PublicKey = h.Value
		case contract.HeaderIdentity:
			f.Identity = h.Value
		case contract.HeaderTokenExpires:
			f.TokenExpires = h.Value
		case contract.HeaderBinding:
			f.Binding = h.Value
		}
	}
	if f.Peer == "" && !d.Bounced {
		return d // not the relay path: nothing the bridge reads
	}
	hs := d.Headers
	if !d.signRoom {
		hs = slices.Clip(hs) // never append into an array another Decision may share
	}
	if client == clientaddr.Unknown {
		// Nothing named the client: no header, and the message of the
		// five fields a bridge that predates the client address verifies.
		d.Headers = append(hs, Header{contract.HeaderSignature, signer.Sign(f)})
		return d
	}
	f.ClientAddress = client
	d.Headers = append(hs, Header{contract.HeaderClientAddress, client}, Header{contract.HeaderSignature, signer.Sign(f)})
	return d
}

// publishKeyring writes kr's public keys to --identity-keys-file, if set:
// the bridge of this Pod learns a key before any answer carries it.
func publishKeyring(kr *keyring, o SigningOptions) error {
	if o.IdentityKeysFile == "" {
		return nil
	}
	if err := identitysig.WriteKeys(o.IdentityKeysFile, kr.published, kr.mac); err != nil {
		return fmt.Errorf("--identity-keys-file: %w (mount the directory the bridge shares, docs/revocation.md#signing)", err)
	}
	return nil
}

// installKeyring publishes kr's public keys, then signs with it (a reload
// of the key files).
func (a *Authorizer) installKeyring(kr *keyring, o SigningOptions) error {
	if err := publishKeyring(kr, o); err != nil {
		return err
	}
	a.signer.cur.Store(kr.signer)
	return nil
}

// runSigning loads the signing keys, publishes them and, when they come
// from files, re-reads them every signingReloadInterval until ctx is done.
// A reload that fails keeps the keys in use and logs the error.
func (a *Authorizer) runSigning(ctx context.Context, o SigningOptions, kr *keyring, log *slog.Logger) error {
	if o.IdentitySigningKeyFile == "" {
		return nil
	}
	t := time.NewTicker(signingReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		next, err := loadKeyring(o)
		if err == nil && next.same(kr) {
			continue
		}
		if err == nil {
			err = a.installKeyring(next, o)
		}
		if err != nil {
			log.Error("identity signing keys not reloaded, keeping the current ones", "error", err)
			continue
		}
		kr = next
		log.Info("identity signing keys reloaded", "signing_key_id", kr.signer.KeyID(), "published_key_ids", kr.fingerprints())
	}
}
