// Package signkeys holds extauthz's identity signing keys: the key files
// read (--identity-signing-key-file, --identity-accepted-keys-file) or a
// per-start MAC key, the public halves published to the bridge of this Pod
// (--identity-keys-file) before anything is signed with them, and their
// reload. extauthz signs its answers with the Signer a Keyring holds.
package signkeys

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"time"

	"github.com/wirekube/relay-ws/internal/identitysig"
)

// ReloadInterval is how often the key files are re-read when set
// (a mounted Secret changes in place; kubelet's own sync takes up to about
// a minute more).
const ReloadInterval = 10 * time.Second

// maxPEMFileLen bounds a key file read.
const maxPEMFileLen = 64 << 10

// Keyring is the loaded signing state: the signer and every public key
// published beside its own, or the per-start MAC key.
type Keyring struct {
	signer    *identitysig.Signer
	published []ed25519.PublicKey
	mac       []byte // the per-start MAC key; nil with a signing key file
}

// Load reads the key files; without a signing key file it makes a
// fresh MAC key: only the bridge of this Pod, which reads it from the
// directory the two share, verifies what this extauthz answers, so a
// keyed MAC proves as much as a signature at a fraction of its cost
// (docs/revocation.md#signing).
func Load(o Options) (*Keyring, error) {
	if o.IdentitySigningKeyFile == "" {
		key := identitysig.NewMACKey()
		return &Keyring{signer: identitysig.NewMACSigner(key, nil), mac: key}, nil
	}
	privs, pubs, err := readPEMKeys("identity-signing-key-file", o.IdentitySigningKeyFile)
	if err != nil {
		return nil, err
	}
	if len(privs) != 1 || len(pubs) != 1 {
		return nil, fmt.Errorf("--identity-signing-key-file: want exactly one PRIVATE KEY block, got %d keys", len(pubs))
	}
	kr := &Keyring{signer: identitysig.NewSigner(privs[0], nil), published: pubs}
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
func (k *Keyring) same(o *Keyring) bool {
	return k.signer.KeyID() == o.signer.KeyID() && slices.EqualFunc(k.published, o.published,
		func(a, b ed25519.PublicKey) bool { return bytes.Equal(a, b) })
}

// Fingerprints are the key ids, for the log line (never the keys).
func (k *Keyring) Fingerprints() []string {
	ids := make([]string, 0, len(k.published)+1)
	for _, p := range k.published {
		ids = append(ids, identitysig.KeyID(p))
	}
	if k.mac != nil {
		ids = append(ids, identitysig.MACKeyID(k.mac))
	}
	return ids
}

// Publish writes kr's public keys to --identity-keys-file, if set:
// the bridge of this Pod learns a key before any answer carries it.
func Publish(kr *Keyring, o Options) error {
	if o.IdentityKeysFile == "" {
		return nil
	}
	if err := identitysig.WriteKeys(o.IdentityKeysFile, kr.published, kr.mac); err != nil {
		return fmt.Errorf("--identity-keys-file: %w (mount the directory the bridge shares, docs/revocation.md#signing)", err)
	}
	return nil
}

// Signer is what kr signs with.
func (k *Keyring) Signer() *identitysig.Signer { return k.signer }

// Run re-reads the key files every ReloadInterval, when they are set, until
// ctx is done, and hands a keyring that changed to install (which publishes
// it, then signs with it). A reload that fails keeps the keys in use and
// logs the error.
func Run(ctx context.Context, o Options, kr *Keyring, install func(*Keyring) error, log *slog.Logger) error {
	if o.IdentitySigningKeyFile == "" {
		return nil
	}
	t := time.NewTicker(ReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		next, err := Load(o)
		if err == nil && next.same(kr) {
			continue
		}
		if err == nil {
			err = install(next)
		}
		if err != nil {
			log.Error("identity signing keys not reloaded, keeping the current ones", "error", err)
			continue
		}
		kr = next
		log.Info("identity signing keys reloaded", "signing_key_id", kr.signer.KeyID(), "published_key_ids", kr.Fingerprints())
	}
}
