package relayproto

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
)

// Body errors.
var (
	ErrKeySize  = errors.New("relayproto: public key is not 32 bytes")
	ErrDataBody = errors.New("relayproto: data body shorter than a 32-byte key")
)

// Key is a WireGuard public key. Its String method prints only a short
// fingerprint, so a Key passed to a logger never shows the whole key.
type Key [KeySize]byte

// ParseKey decodes standard base64 (with padding) of exactly 32 bytes.
func ParseKey(s string) (Key, error) {
	if len(s) != base64.StdEncoding.EncodedLen(KeySize) {
		return Key{}, ErrKeySize
	}
	// 44 base64 characters decode to at most 33 bytes; the padding check
	// below turns a 33-byte decoding into ErrKeySize.
	var buf [KeySize + 1]byte
	n, err := base64.StdEncoding.Strict().Decode(buf[:], []byte(s))
	if err != nil {
		return Key{}, fmt.Errorf("relayproto: public key: %w", err)
	}
	return KeyFromBytes(buf[:n])
}

// KeyFromBytes copies a 32-byte slice into a Key.
func KeyFromBytes(b []byte) (Key, error) {
	var k Key
	if len(b) != KeySize {
		return k, ErrKeySize
	}
	copy(k[:], b)
	return k, nil
}

// Base64 is the standard base64 form used by WireKubePeer.spec.publicKey.
func (k Key) Base64() string { return base64.StdEncoding.EncodeToString(k[:]) }

// Fingerprint is the first 8 hex digits of SHA-256 of the key: enough to
// tell keys apart in logs, never enough to reconstruct one.
func (k Key) Fingerprint() string {
	sum := sha256.Sum256(k[:])
	return hex.EncodeToString(sum[:4])
}

// String returns the fingerprint, never the key.
func (k Key) String() string { return k.Fingerprint() }

// Equal compares two keys in constant time.
func (k Key) Equal(o Key) bool { return subtle.ConstantTimeCompare(k[:], o[:]) == 1 }

// ParseRegister returns the key of a Register body.
func ParseRegister(body []byte) (Key, error) { return KeyFromBytes(body) }

// AppendRegister appends a whole Register frame for k.
func AppendRegister(dst []byte, k Key) []byte { return AppendFrame(dst, TypeRegister, k[:]) }

// ParseData splits a Data body into its key (the destination when sent by
// an agent, the source when delivered by the relay) and payload. The
// payload aliases body.
func ParseData(body []byte) (Key, []byte, error) {
	if len(body) < KeySize {
		return Key{}, nil, ErrDataBody
	}
	k, _ := KeyFromBytes(body[:KeySize])
	return k, body[KeySize:], nil
}

// AppendData appends a whole Data frame addressed to k carrying payload.
func AppendData(dst []byte, k Key, payload []byte) []byte {
	return AppendFrame(dst, TypeData, k[:], payload)
}
