// Package identitysig is the signature extauthz puts on the identity headers
// it answers and the bridge verifies before an upgrade
// (docs/spec.md#identity-headers): without it, anyone who reaches the bridge's
// address could send a complete identity header set of their own.
//
// The header value is
//
//	v1.<kid>.<iat>.<nonce>.<sig>
//
// kid: 16 lowercase hex characters, the first 8 bytes of SHA-256 of the
// Ed25519 public key; iat: the signing time in Unix milliseconds (decimal);
// nonce: 16 random bytes, base64url without padding (22 characters); sig:
// the 64-byte Ed25519 signature (86 characters, base64url without padding)
// over Message. The nonce makes an answer single-use, iat short-lived. An
// extauthz whose only verifier is the bridge of its own Pod writes the m1
// form instead, the same message under HMAC-SHA256 (mac.go). The package
// imports nothing of either server.
package identitysig

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Version is the only signature format this package writes and reads.
const Version = "v1"

// MaxHeaderLen bounds the header value a parser looks at; a valid one is
// 3 + 17 + at most 16 + 23 + 86 = 145 bytes (a MAC one 102).
const MaxHeaderLen = 160

// NonceLen is the nonce's length in bytes (128 bits).
const NonceLen = 16

// kidLen is the key id's length in hex characters.
const kidLen = 16

// ErrMalformed is returned by Parse for a value that is not a v1 signature.
var ErrMalformed = errors.New("identitysig: malformed signature")

// Fields are the identity header values a signature covers, exactly as the
// proxy passes them (contract.HeaderPeer, HeaderPublicKey, HeaderIdentity,
// HeaderTokenExpires, HeaderBinding, HeaderClientAddress; Binding and
// ClientAddress may be empty).
type Fields struct {
	Peer, PublicKey, Identity, TokenExpires, Binding string
	// ClientAddress is the client's address as extauthz established it.
	// Empty (an extauthz that predates it) leaves it out of
	// the message altogether, so such a signature still verifies; a
	// non-empty one is a sixth length-prefixed field, so no five-field
	// message equals a six-field one.
	ClientAddress string
}

// Signature is a parsed header value.
type Signature struct {
	// MAC marks the in-Pod form (MACVersion, mac.go): Sig[:32] is an
	// HMAC-SHA256 tag and Sig[32:] is zero.
	MAC      bool
	KeyID    string
	IssuedAt time.Time // millisecond precision
	Nonce    [NonceLen]byte
	Sig      [ed25519.SignatureSize]byte
}

// KeyID names pub in signatures and in the public keys file.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:kidLen/2])
}

// domain separates these signatures from any other use of the same key.
const domain = "wirekube-identity-signature-v1"

// Message is the byte string a signature signs: the domain, then each of
// kid, iat (8 bytes big endian), nonce and the five fields (six when
// ClientAddress is set), each prefixed with its length (4 bytes big
// endian), so that no two field sets share an encoding whatever bytes they
// hold.
func Message(kid string, iatMillis int64, nonce [NonceLen]byte, f Fields) []byte {
	return appendMessage(nil, kid, iatMillis, nonce, f)
}

func appendMessage(m []byte, kid string, iatMillis int64, nonce [NonceLen]byte, f Fields) []byte {
	return appendMessageIn(m, domain, kid, iatMillis, nonce, f)
}

// appendMessageIn is Message behind domain dom.
func appendMessageIn(m []byte, dom, kid string, iatMillis int64, nonce [NonceLen]byte, f Fields) []byte {
	var iat [8]byte
	binary.BigEndian.PutUint64(iat[:], uint64(iatMillis))
	m = append(m, dom...)
	m = appendField(m, kid)
	m = binary.BigEndian.AppendUint32(m, 8)
	m = append(m, iat[:]...)
	m = binary.BigEndian.AppendUint32(m, NonceLen)
	m = append(m, nonce[:]...)
	for _, v := range [...]string{f.Peer, f.PublicKey, f.Identity, f.TokenExpires, f.Binding} {
		m = appendField(m, v)
	}
	if f.ClientAddress != "" {
		m = appendField(m, f.ClientAddress)
	}
	return m
}

func appendField(m []byte, v string) []byte {
	m = binary.BigEndian.AppendUint32(m, uint32(len(v)))
	return append(m, v...)
}

// Signer signs identity headers with one private key (NewSigner) or
// authenticates them with one MAC key (NewMACSigner). Safe for concurrent
// use.
type Signer struct {
	priv ed25519.PrivateKey // nil for a MAC signer
	mac  *macPool           // nil for an Ed25519 signer
	kid  string
	now  func() time.Time
}

// NewSigner returns a Signer of priv; now nil uses time.Now.
func NewSigner(priv ed25519.PrivateKey, now func() time.Time) *Signer {
	if now == nil {
		now = time.Now
	}
	return &Signer{priv: priv, kid: KeyID(priv.Public().(ed25519.PublicKey)), now: now}
}

// KeyID is the id of the signer's key.
func (s *Signer) KeyID() string { return s.kid }

// Public is the signer's public key; nil for a MAC signer.
func (s *Signer) Public() ed25519.PublicKey {
	if s.priv == nil {
		return nil
	}
	return s.priv.Public().(ed25519.PublicKey)
}

// Sign returns the header value signing f now, with a fresh nonce. The
// message is built in a stack buffer when it fits (a check's cost matters:
// extauthz signs every relay allow).
func (s *Signer) Sign(f Fields) string {
	var nonce [NonceLen]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails (Go 1.24+)
	iat := s.now().UnixMilli()
	out := Signature{MAC: s.mac != nil, KeyID: s.kid, IssuedAt: time.UnixMilli(iat), Nonce: nonce}
	if s.mac != nil {
		s.mac.sum((*[macLen]byte)(out.Sig[:macLen]), s.kid, iat, nonce, f)
		return Format(out)
	}
	var buf [3072]byte
	copy(out.Sig[:], ed25519.Sign(s.priv, appendMessage(buf[:0], s.kid, iat, nonce, f)))
	return Format(out)
}

// Format renders sig as a header value.
func Format(sig Signature) string {
	enc := base64.RawURLEncoding
	var buf [MaxHeaderLen]byte
	version, tag := Version, sig.Sig[:]
	if sig.MAC {
		version, tag = MACVersion, sig.Sig[:macLen]
	}
	b := append(buf[:0], version...)
	b = append(b, '.')
	b = append(b, sig.KeyID...)
	b = append(b, '.')
	b = strconv.AppendInt(b, sig.IssuedAt.UnixMilli(), 10)
	b = append(b, '.')
	b = enc.AppendEncode(b, sig.Nonce[:])
	b = append(b, '.')
	b = enc.AppendEncode(b, tag)
	return string(b)
}

// Parse reads a header value: untrusted bytes. It checks the length before
// it splits anything, and accepts exactly the canonical form Format writes
// (one encoding per signature, so a re-encoded copy is not a new nonce).
func Parse(v string) (Signature, error) {
	if len(v) > MaxHeaderLen {
		return Signature{}, fmt.Errorf("%w: over %d bytes", ErrMalformed, MaxHeaderLen)
	}
	var parts [5]string // no allocation: the bridge parses one per upgrade
	n, rest := 0, v
	for ; n < len(parts)-1; n++ {
		var ok bool
		if parts[n], rest, ok = strings.Cut(rest, "."); !ok {
			break
		}
	}
	parts[n] = rest
	if n != len(parts)-1 || strings.Contains(rest, ".") || (parts[0] != Version && parts[0] != MACVersion) {
		return Signature{}, fmt.Errorf("%w: want %s.<kid>.<iat>.<nonce>.<sig> or %s.<kid>.<iat>.<nonce>.<mac>", ErrMalformed, Version, MACVersion)
	}
	sig := Signature{MAC: parts[0] == MACVersion}
	tag := sig.Sig[:]
	if sig.MAC {
		tag = sig.Sig[:macLen]
	}
	if !isKeyID(parts[1]) {
		return Signature{}, fmt.Errorf("%w: key id", ErrMalformed)
	}
	sig.KeyID = parts[1]
	iat, ok := parseMillis(parts[2])
	if !ok {
		return Signature{}, fmt.Errorf("%w: issue time", ErrMalformed)
	}
	sig.IssuedAt = time.UnixMilli(iat)
	if !decodeExact(sig.Nonce[:], parts[3]) {
		return Signature{}, fmt.Errorf("%w: nonce", ErrMalformed)
	}
	if !decodeExact(tag, parts[4]) {
		return Signature{}, fmt.Errorf("%w: signature", ErrMalformed)
	}
	return sig, nil
}

func isKeyID(s string) bool {
	if len(s) != kidLen {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// parseMillis accepts 1 to 16 decimal digits without a sign or a leading
// zero (the canonical form of a positive Unix millisecond time).
func parseMillis(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 16 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	var n int64
	for i := range len(s) {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// decodeExact decodes base64url without padding into dst, which it must
// fill exactly; the strict decoder refuses non-zero trailing bits, so each
// byte string has one encoding.
func decodeExact(dst []byte, s string) bool {
	enc := base64.RawURLEncoding.Strict()
	if enc.DecodedLen(len(s)) != len(dst) {
		return false
	}
	n, err := enc.Decode(dst, []byte(s))
	return err == nil && n == len(dst)
}
