// Package identitycheck is the bridge's check of extauthz's signature on
// the identity headers (docs/revocation.md#signing): the keys file it
// trusts, re-read every --identity-keys-reload-interval and for an unknown
// key id, the replay cache whose nonces are spent only by an upgrade
// answered 101, their flags and metrics. It imports nothing of the bridge:
// the bridge parses the identity headers and hands the check the values
// the signature covers.
package identitycheck

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/identitysig"
)

// Verified is a signature Check accepted whose nonce Spend is still to
// spend.
type Verified = identitysig.Verified

// Checker verifies the signed identity headers of an upgrade. With
// --identity-keys-file empty the check is off and every method passes.
// Safe for concurrent use.
type Checker struct {
	v    *identitysig.Verifier // nil: the check is off
	keys *keyReloader          // nil: the check is off
}

// New builds the check of the validated options and registers its
// metrics on reg; with the keys file empty it logs a warning (the listener
// then trusts whoever reaches it) and registers none.
func New(o SignatureOptions, r KeysReloadOptions, log *slog.Logger, reg prometheus.Registerer) (*Checker, error) {
	if o.IdentityKeysFile == "" {
		log.Warn("identity signature check off (--identity-keys-file empty): any client reaching the listener can claim any identity")
		return &Checker{}, nil
	}
	keys, err := newKeyReloader(o.IdentityKeysFile, r.IdentityKeysReloadInterval, log, reg)
	if err != nil {
		return nil, err
	}
	v := &identitysig.Verifier{Keys: keys.keys.Lookup, MACKeys: keys.keys.LookupMAC,
		MaxAge: o.IdentitySignatureMaxAge, Replay: identitysig.NewSharedReplayCache(o.IdentityReplayCacheSize, o.IdentityReplayPeerShare)}
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "wirekube_bridge_identity_replay_cache_entries",
		Help: "Signature nonces remembered within --identity-signature-max-age (at most --identity-replay-cache-size).",
	}, func() float64 { return float64(v.Replay.Len()) })
	if err := reg.Register(g); err != nil {
		return nil, fmt.Errorf("bridge: metrics: %w", err)
	}
	return &Checker{v: v, keys: keys}, nil
}

// Run re-reads the keys file every interval until ctx is done; with the
// check off it returns at once.
func (c *Checker) Run(ctx context.Context) { c.keys.run(ctx) }

// Check verifies X-WireKube-Signature of h over the identity headers, and
// that its nonce is unused, before the relay is dialled. peer, identity and
// binding are the values the caller parsed from h (each header at most
// once); the public key, token expiry and client address are read from h
// as sent. It spends nothing: Spend does, once every other check passed.
// Any failure is a deny: fail closed.
func (c *Checker) Check(h http.Header, peer, identity, binding string) (Verified, contract.Reason, error) {
	if c.v == nil {
		return Verified{}, "", nil
	}
	return c.v.Check(h.Values(contract.HeaderSignature), identitysig.Fields{
		Peer: peer, PublicKey: h.Get(contract.HeaderPublicKey), Identity: identity,
		TokenExpires: h.Get(contract.HeaderTokenExpires), Binding: binding,
		ClientAddress: h.Get(contract.HeaderClientAddress),
	})
}

// CheckBounce verifies the signature of extauthz's bounce answer: over the
// bounce binding and the client address only (a bounce carries no
// identity). A bounce spends no nonce.
func (c *Checker) CheckBounce(h http.Header) (contract.Reason, error) {
	if c.v == nil {
		return "", nil
	}
	_, reason, err := c.v.Check(h.Values(contract.HeaderSignature), identitysig.Fields{
		Binding: contract.BindingBounce, ClientAddress: h.Get(contract.HeaderClientAddress),
	})
	return reason, err
}

// Spend records the nonce Check accepted, in the peer's share, at the
// upgrade's point of no return: after every other check, just before the
// 101. A refused upgrade therefore holds no entry, and of two upgrades with
// one signature exactly one gets here first.
func (c *Checker) Spend(ok Verified, peer string) (contract.Reason, error) {
	if c.v == nil {
		return "", nil
	}
	return c.v.Spend(ok, peer)
}

// Refusal reports a deny reason of the signature check: a header set the
// bridge cannot trust reached its listener, which someone should look at
// (the bridge logs it at warning level).
func Refusal(r contract.Reason) bool {
	switch r {
	case contract.ReasonIdentitySignatureMissing, contract.ReasonIdentitySignatureInvalid,
		contract.ReasonIdentitySignatureStale, contract.ReasonIdentitySignatureReplayed:
		return true
	}
	return false
}
