package signkeys

import (
	"errors"
	"flag"
)

// DefaultIdentityKeysFile is where extauthz publishes the public halves of
// its identity signing keys: the directory it shares with the bridge of its
// Pod (docs/revocation.md#signing).
const DefaultIdentityKeysFile = "/run/wirekube-revocation/identity-keys"

// Options configure the signature on the identity headers
// (docs/revocation.md#signing).
type Options struct {
	// IdentitySigningKeyFile is a PEM Ed25519 private key (PKCS #8, from a
	// Secret mounted into this container only) to sign with. Empty (the
	// default): a fresh HMAC-SHA256 key at every start, written to
	// IdentityKeysFile (mode 0640), which only the bridge of this Pod
	// knows: right when the front asks the extauthz of the same Pod
	// (Envoy in the Pod, the nginx/Caddy/Traefik sidecars); a front that may
	// ask another replica (ingress-nginx auth-url to the Service, front:
	// none) needs the same key in every replica.
	IdentitySigningKeyFile string
	// IdentityAcceptedKeysFile holds further PEM keys (PUBLIC KEY or
	// PRIVATE KEY blocks) whose public halves are published but never
	// signed with: the next key before a rotation, the previous one after
	// it. Optional, and so is the file: while it does not exist no further
	// key is published (the chart mounts it from an optional Secret key, so
	// that a Secret holding signing.pem alone is enough).
	IdentityAcceptedKeysFile string
	// IdentityKeysFile is where the public halves are written (mode 0644),
	// or the per-start MAC key (mode 0640), for the bridge's
	// --identity-keys-file. Default DefaultIdentityKeysFile;
	// empty publishes nothing (the bridge then needs the public key some
	// other way).
	IdentityKeysFile string
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{IdentityKeysFile: DefaultIdentityKeysFile}
}

// AddFlags registers the signing flags on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.IdentitySigningKeyFile, "identity-signing-key-file", o.IdentitySigningKeyFile, "PEM Ed25519 private key that signs the identity headers (X-WireKube-Signature), re-read every 10s; empty: a fresh HMAC-SHA256 key per start, known only to the bridge of this Pod")
	fs.StringVar(&o.IdentityAcceptedKeysFile, "identity-accepted-keys-file", o.IdentityAcceptedKeysFile, "PEM Ed25519 keys published to the bridge but never signed with (the next or previous key of a rotation), re-read every 10s; a missing file publishes none")
	fs.StringVar(&o.IdentityKeysFile, "identity-keys-file", o.IdentityKeysFile, "file the public halves of the identity signing keys (or the per-start MAC key, mode 0640) are written to, for the bridge's --identity-keys-file; empty publishes none")
}

// Validate reports every invalid field, each error naming its flag.
func (o *Options) Validate() error {
	if o.IdentityAcceptedKeysFile != "" && o.IdentitySigningKeyFile == "" {
		return errors.New("--identity-accepted-keys-file: needs --identity-signing-key-file (a per-start key has no rotation)")
	}
	return nil
}
