package bridge

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/identitysig"
)

// keysMinReload bounds how often an unknown key id re-reads an unchanged
// keys file; within it, each unknown key id costs a stat of the file, and
// a re-read only when the stat shows the file changed (a key just
// published is trusted on the first request that names it).
const keysMinReload = time.Second

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
