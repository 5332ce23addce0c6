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
	// Keys finds the key of a signature's key id.
	Keys KeyLookup
	// MaxAge is how long after its issue time a signature is accepted.
	MaxAge time.Duration
	// Replay remembers the nonces accepted within MaxAge.
	Replay *ReplayCache
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

// Verify checks the X-WireKube-Signature values of a request against the
// identity fields it carries, and consumes its nonce. It returns the deny
// reason and an error for the log line, or "" and nil. The checks run in
// this order so that nothing unauthenticated reaches the replay cache:
// shape, key id, signature, age, nonce.
func (v *Verifier) Verify(values []string, f Fields) (contract.Reason, error) {
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	t := now()
	switch {
	case len(values) == 0:
		return contract.ReasonIdentitySignatureMissing, errors.New("no " + contract.HeaderSignature)
	case len(values) > 1:
		return contract.ReasonIdentitySignatureInvalid, errors.New(contract.HeaderSignature + " repeated")
	}
	sig, err := Parse(values[0])
	if err != nil {
		return contract.ReasonIdentitySignatureInvalid, err
	}
	pub, err := v.Keys(sig.KeyID, t)
	if err != nil {
		return contract.ReasonIdentitySignatureInvalid, fmt.Errorf("key id %s: %w", sig.KeyID, err)
	}
	if !ed25519.Verify(pub, Message(sig.KeyID, sig.IssuedAt.UnixMilli(), sig.Nonce, f), sig.Sig[:]) {
		return contract.ReasonIdentitySignatureInvalid, fmt.Errorf("signature of key id %s does not verify over these headers", sig.KeyID)
	}
	switch age := t.Sub(sig.IssuedAt); {
	case age > v.MaxAge:
		return contract.ReasonIdentitySignatureStale, fmt.Errorf("signed %s ago, over %s", age.Round(time.Millisecond), v.MaxAge)
	case -age > MaxFutureSkew:
		return contract.ReasonIdentitySignatureStale, fmt.Errorf("signed %s in the future, over %s", (-age).Round(time.Millisecond), MaxFutureSkew)
	}
	switch err := v.Replay.Add(sig.Nonce, sig.IssuedAt.Add(v.MaxAge), t); {
	case errors.Is(err, ErrReplayed):
		return contract.ReasonIdentitySignatureReplayed, err
	case err != nil:
		return contract.ReasonIdentityReplayCacheFull, err
	}
	return "", nil
}
