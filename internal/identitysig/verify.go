package identitysig

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// MaxFutureSkew is how far in the future an issue time may lie: the clocks
// of extauthz (another node's, behind a shared key) and the bridge differ.
const MaxFutureSkew = 2 * time.Second

// KeyLookup returns the public key of a key id (FileKeys.Lookup).
type KeyLookup func(kid string, now time.Time) (ed25519.PublicKey, error)

// Verifier checks the signature of an upgrade's identity headers. Safe for
// concurrent use.
type Verifier struct {
	// Keys finds the public key of a signature's key id.
	Keys KeyLookup
	// MACKeys finds the MAC key of an in-Pod value's key id (MACVersion);
	// nil refuses every such value as invalid.
	MACKeys MACLookup
	// MaxAge is how long after its issue time a signature is accepted.
	MaxAge time.Duration
	// Replay remembers the nonces accepted within MaxAge.
	Replay *ReplayCache
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

// Verified is a signature Check accepted whose nonce is still to be spent.
type Verified struct {
	nonce [NonceLen]byte
	until time.Time
}

// Verify is Check then Spend for the fields' peer: it consumes the nonce.
func (v *Verifier) Verify(values []string, f Fields) (contract.Reason, error) {
	ok, reason, err := v.Check(values, f)
	if reason != "" {
		return reason, err
	}
	return v.Spend(ok, f.Peer)
}

// Check checks the X-WireKube-Signature values of a request against the
// identity fields it carries, and that its nonce is unused so far; it
// spends nothing (Spend does, at the point of no return). It returns the
// deny reason and an error for the log line, or "" and nil. The checks run
// in this order so that nothing unauthenticated reaches the replay cache:
// shape, key id, signature, age, nonce.
func (v *Verifier) Check(values []string, f Fields) (Verified, contract.Reason, error) {
	t := v.now()
	switch {
	case len(values) == 0:
		return Verified{}, contract.ReasonIdentitySignatureMissing, errors.New("no " + contract.HeaderSignature)
	case len(values) > 1:
		return Verified{}, contract.ReasonIdentitySignatureInvalid, errors.New(contract.HeaderSignature + " repeated")
	}
	sig, err := Parse(values[0])
	if err != nil {
		return Verified{}, contract.ReasonIdentitySignatureInvalid, err
	}
	if err := v.authentic(sig, f, t); err != nil {
		return Verified{}, contract.ReasonIdentitySignatureInvalid, err
	}
	switch age := t.Sub(sig.IssuedAt); {
	case age > v.MaxAge:
		return Verified{}, contract.ReasonIdentitySignatureStale, fmt.Errorf("signed %s ago, over %s", age.Round(time.Millisecond), v.MaxAge)
	case -age > MaxFutureSkew:
		return Verified{}, contract.ReasonIdentitySignatureStale, fmt.Errorf("signed %s in the future, over %s", (-age).Round(time.Millisecond), MaxFutureSkew)
	}
	if v.Replay.Seen(sig.Nonce, t) {
		return Verified{}, contract.ReasonIdentitySignatureReplayed, ErrReplayed
	}
	return Verified{nonce: sig.Nonce, until: sig.IssuedAt.Add(v.MaxAge)}, "", nil
}

// Spend records ok's nonce as used by owner: once per nonce, whoever calls
// it first (a concurrent second Spend is a replay), within owner's share.
func (v *Verifier) Spend(ok Verified, owner string) (contract.Reason, error) {
	switch err := v.Replay.Spend(ok.nonce, owner, ok.until, v.now()); {
	case errors.Is(err, ErrReplayed):
		return contract.ReasonIdentitySignatureReplayed, err
	case errors.Is(err, ErrShareFull):
		return contract.ReasonIdentityReplayPeerShare, err
	case err != nil:
		return contract.ReasonIdentityReplayCacheFull, err
	}
	return "", nil
}

// authentic checks sig over f with the key its id names: an Ed25519
// signature with a public key, a MAC (constant-time compare) with a MAC key.
func (v *Verifier) authentic(sig Signature, f Fields, t time.Time) error {
	if sig.MAC {
		if v.MACKeys == nil {
			return fmt.Errorf("key id %s: %w (no MAC keys here)", sig.KeyID, ErrUnknownKey)
		}
		key, err := v.MACKeys(sig.KeyID, t)
		if err != nil {
			return fmt.Errorf("key id %s: %w", sig.KeyID, err)
		}
		if !verifyMAC(key, sig, f) {
			return fmt.Errorf("MAC of key id %s does not verify over these headers", sig.KeyID)
		}
		return nil
	}
	pub, err := v.Keys(sig.KeyID, t)
	if err != nil {
		return fmt.Errorf("key id %s: %w", sig.KeyID, err)
	}
	var buf [3072]byte // the message on the stack: one upgrade's garbage is its own
	if !ed25519.Verify(pub, appendMessage(buf[:0], sig.KeyID, sig.IssuedAt.UnixMilli(), sig.Nonce, f), sig.Sig[:]) {
		return fmt.Errorf("signature of key id %s does not verify over these headers", sig.KeyID)
	}
	return nil
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}
