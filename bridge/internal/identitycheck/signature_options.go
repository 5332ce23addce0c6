package identitycheck

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// DefaultKeysFile is extauthz's --identity-keys-file: the public
// keys it signs the identity headers with, in the directory the Pod's two
// containers share (docs/revocation.md#signing).
const DefaultKeysFile = "/run/wirekube-revocation/identity-keys"

// SignatureOptions are the settings of the identity header signature check
// (docs/revocation.md#signing).
type SignatureOptions struct {
	// IdentityKeysFile holds the public keys whose X-WireKube-Signature the
	// bridge accepts (written by extauthz; re-read every
	// --identity-keys-reload-interval and when a signature names an
	// unknown key id: at once when a stat shows the file changed, else at
	// most once a second). Default
	// DefaultKeysFile. Empty turns the check off: then whoever
	// reaches the bridge's listener can claim any identity. Only for a
	// bridge whose listener no one but its front can reach (a Unix socket),
	// and for tests.
	IdentityKeysFile string
	// IdentitySignatureMaxAge is how long after extauthz signed it a header
	// set is accepted (403 identity_signature_stale beyond; a signature up
	// to identitysig.MaxFutureSkew in the future passes). Default 30s: the
	// front forwards the upgrade within milliseconds of the answer; the
	// margin is for the clocks of two nodes when another replica signed.
	IdentitySignatureMaxAge time.Duration
	// IdentityReplayCacheSize bounds the nonces remembered within the max
	// age (each about 60 bytes); when all are live, upgrades get 503
	// identity_replay_cache_full. Default 65536: over 2,000 upgrades a
	// second sustained for the default max age. Only an upgrade answered
	// 101 takes an entry (a refused one spends nothing): filling it takes
	// that many admitted upgrades.
	IdentityReplayCacheSize int
	// IdentityReplayPeerShare bounds the entries one WireKubePeer holds
	// (its upgrades answered 101 within the max age); beyond it its
	// upgrades get 429 identity_replay_peer_share and other peers' are
	// unaffected. Default 64: an agent reconnects at most once a second
	// (spec.md, reconnect policy), 30 within the default max age, so it
	// never meets the bound; filling the default cache takes 1,024 peers,
	// each with its own token. At most IdentityReplayCacheSize.
	IdentityReplayPeerShare int
}

// DefaultSignatureOptions returns the documented defaults.
func DefaultSignatureOptions() SignatureOptions {
	return SignatureOptions{IdentityKeysFile: DefaultKeysFile, IdentitySignatureMaxAge: 30 * time.Second,
		IdentityReplayCacheSize: 65536, IdentityReplayPeerShare: 64}
}

// AddFlags registers one flag per field on fs.
func (o *SignatureOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.IdentityKeysFile, "identity-keys-file", o.IdentityKeysFile, "extauthz's --identity-keys-file: the public keys X-WireKube-Signature must verify against; empty turns the check off (anyone reaching the listener can claim any identity)")
	fs.DurationVar(&o.IdentitySignatureMaxAge, "identity-signature-max-age", o.IdentitySignatureMaxAge, "accept identity headers this long after extauthz signed them (403 identity_signature_stale beyond)")
	fs.IntVar(&o.IdentityReplayCacheSize, "identity-replay-cache-size", o.IdentityReplayCacheSize, "signature nonces remembered within the max age (503 identity_replay_cache_full when all are live)")
	fs.IntVar(&o.IdentityReplayPeerShare, "identity-replay-peer-share", o.IdentityReplayPeerShare, "of those, the most one WireKubePeer holds (429 identity_replay_peer_share beyond; at most --identity-replay-cache-size)")
}

// Validate reports every invalid setting, each error naming its flag.
func (o *SignatureOptions) Validate() error {
	var errs []error
	if o.IdentitySignatureMaxAge <= 0 || o.IdentitySignatureMaxAge > 5*time.Minute {
		errs = append(errs, fmt.Errorf("--identity-signature-max-age: want over 0 and at most 5m, got %s", o.IdentitySignatureMaxAge))
	}
	if o.IdentityReplayCacheSize < 1 {
		errs = append(errs, fmt.Errorf("--identity-replay-cache-size: must be at least 1, got %d", o.IdentityReplayCacheSize))
	}
	if o.IdentityReplayPeerShare < 1 || o.IdentityReplayPeerShare > o.IdentityReplayCacheSize {
		errs = append(errs, fmt.Errorf("--identity-replay-peer-share: want at least 1 and at most --identity-replay-cache-size (%d), got %d",
			o.IdentityReplayCacheSize, o.IdentityReplayPeerShare))
	}
	return errors.Join(errs...)
}
