package bridge

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/identitysig"
)

// DefaultIdentityKeysFile is extauthz's --identity-keys-file: the public
// keys it signs the identity headers with, in the directory the Pod's two
// containers share (docs/revocation.md#signing).
const DefaultIdentityKeysFile = "/run/wirekube-revocation/identity-keys"

// keysMinReload bounds how often an unknown key id re-reads the keys file.
const keysMinReload = time.Second

// SignatureOptions are the settings of the identity header signature check
// (docs/revocation.md#signing).
type SignatureOptions struct {
	// IdentityKeysFile holds the public keys whose X-WireKube-Signature the
	// bridge accepts (written by extauthz; re-read every
	// --identity-keys-reload-interval and when a signature names an
	// unknown key id, at most once a second). Default
	// DefaultIdentityKeysFile. Empty turns the check off: then whoever
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
	return SignatureOptions{IdentityKeysFile: DefaultIdentityKeysFile, IdentitySignatureMaxAge: 30 * time.Second,
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

// newSignatureCheck builds the verifier of cfg, nil when the check is off
// (logged as a warning: the listener then trusts whoever reaches it), and
// registers the replay cache gauge.
func newSignatureCheck(cfg *Config, keys *keyReloader, log *slog.Logger, reg prometheus.Registerer) (*identitysig.Verifier, error) {
	if cfg.IdentityKeysFile == "" {
		log.Warn("identity signature check off (--identity-keys-file empty): any client reaching the listener can claim any identity")
		return nil, nil
	}
	v := &identitysig.Verifier{Keys: keys.keys.Lookup, MACKeys: keys.keys.LookupMAC,
		MaxAge: cfg.IdentitySignatureMaxAge, Replay: identitysig.NewSharedReplayCache(cfg.IdentityReplayCacheSize, cfg.IdentityReplayPeerShare)}
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "wirekube_bridge_identity_replay_cache_entries",
		Help: "Signature nonces remembered within --identity-signature-max-age (at most --identity-replay-cache-size).",
	}, func() float64 { return float64(v.Replay.Len()) })
	if err := reg.Register(g); err != nil {
		return nil, fmt.Errorf("bridge: metrics: %w", err)
	}
	return v, nil
}

// checkSignature verifies X-WireKube-Signature over the identity headers
// parseIdentity and parseBinding accepted (id), and that its nonce is
// unused, before the relay is dialled; it spends nothing: spendNonce does,
// once every other check passed. Any failure is a deny: fail closed.
func (s *Server) checkSignature(h http.Header, id *peerIdentity) (identitysig.Verified, contract.Reason, error) {
	if s.signatures == nil {
		return identitysig.Verified{}, "", nil
	}
	return s.signatures.Check(h.Values(contract.HeaderSignature), identitysig.Fields{
		Peer: id.Peer, PublicKey: h.Get(contract.HeaderPublicKey), Identity: id.Subject,
		TokenExpires: h.Get(contract.HeaderTokenExpires), Binding: id.Binding,
		ClientAddress: h.Get(contract.HeaderClientAddress),
	})
}

// spendNonce records the nonce checkSignature accepted, in the peer's
// share, at the upgrade's point of no return: after every other check, just
// before the 101. A refused upgrade therefore holds no entry, and of two
// upgrades with one signature exactly one gets here first.
func (s *Server) spendNonce(ok identitysig.Verified, id *peerIdentity) (contract.Reason, error) {
	if s.signatures == nil {
		return "", nil
	}
	return s.signatures.Spend(ok, id.Peer)
}

// signatureRefusal reports a deny reason of the signature check: a header
// set the bridge cannot trust reached its listener, which someone should
// look at (logged at warning level).
func signatureRefusal(r contract.Reason) bool {
	switch r {
	case contract.ReasonIdentitySignatureMissing, contract.ReasonIdentitySignatureInvalid,
		contract.ReasonIdentitySignatureStale, contract.ReasonIdentitySignatureReplayed:
		return true
	}
	return false
}
