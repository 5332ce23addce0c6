package identitysig

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"
	"sync/atomic"
	"time"
)

// The in-Pod form of the header: where the verifier is the bridge of the
// signer's own Pod (the per-start key), extauthz authenticates the same
// message with HMAC-SHA256 under a 32-byte secret it writes into the
// directory only the two containers mount, instead of an Ed25519 signature:
//
//	m1.<kid>.<iat>.<nonce>.<mac>
//
// kid: the first 8 bytes of SHA-256 of macKeyIDDomain and the key (hex);
// mac: the 32-byte HMAC-SHA256 (43 characters, base64url without padding)
// over Message with macDomain in place of the signature's domain. iat,
// nonce and the fields are those of the v1 form; so are the checks.
const (
	// MACVersion is the prefix of a MAC header value.
	MACVersion = "m1"
	// MACKeyLen is the MAC key's length in bytes (256 bits).
	MACKeyLen = 32
	// macLen is the tag's length in bytes (HMAC-SHA256, untruncated).
	macLen = sha256.Size
)

// macDomain separates MACs from signatures over the same fields, and
// macKeyIDDomain a key id from any other hash of the key.
const (
	macDomain      = "wirekube-identity-mac-v1"
	macKeyIDDomain = "wirekube-identity-mac-key-id-v1\x00"
)

// NewMACKey returns a fresh random MAC key.
func NewMACKey() []byte {
	k := make([]byte, MACKeyLen)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (Go 1.24+)
	return k
}

// MACKeyID names a MAC key in header values and in the keys file: a hash,
// never the key.
func MACKeyID(key []byte) string {
	h := sha256.New()
	h.Write([]byte(macKeyIDDomain))
	h.Write(key)
	return hex.EncodeToString(h.Sum(nil)[:kidLen/2])
}

// macPool hands out HMAC states keyed with one key, each with its message
// buffer: hmac.New costs two hash states and the padded key, Reset only
// restores the keyed state, and a buffer handed to the hash.Hash interface
// would escape to the heap at every call.
type macPool struct{ p sync.Pool }

type macState struct {
	h   hash.Hash
	buf []byte
	tag [macLen]byte
}

func newMACPool(key []byte) *macPool {
	k := append([]byte(nil), key...)
	return &macPool{p: sync.Pool{New: func() any {
		return &macState{h: hmac.New(sha256.New, k), buf: make([]byte, 0, 1024)}
	}}}
}

// sum writes the MAC of the message of kid, iat, nonce and f into out.
func (m *macPool) sum(out *[macLen]byte, kid string, iatMillis int64, nonce [NonceLen]byte, f Fields) {
	st := m.p.Get().(*macState)
	st.buf = appendMessageIn(st.buf[:0], macDomain, kid, iatMillis, nonce, f)
	st.h.Reset()
	st.h.Write(st.buf)
	st.h.Sum(st.tag[:0])
	*out = st.tag
	if cap(st.buf) > 4096 {
		st.buf = make([]byte, 0, 1024) // keep no outsized buffer
	}
	m.p.Put(st)
}

// NewMACSigner returns a Signer that authenticates with HMAC-SHA256 under
// key (MACKeyLen bytes); now nil uses time.Now.
func NewMACSigner(key []byte, now func() time.Time) *Signer {
	if now == nil {
		now = time.Now
	}
	return &Signer{mac: newMACPool(key), kid: MACKeyID(key), now: now}
}

// MACLookup returns the MAC key of a key id (FileKeys.LookupMAC).
type MACLookup func(kid string, now time.Time) ([]byte, error)

// verifyMAC reports whether sig's tag is the MAC of f under key, in
// constant time. The states are pooled per key (the bridge verifies with
// one key per extauthz start), so a verification allocates nothing.
func verifyMAC(key []byte, sig Signature, f Fields) bool {
	var want [macLen]byte
	poolFor(key).sum(&want, sig.KeyID, sig.IssuedAt.UnixMilli(), sig.Nonce, f)
	return hmac.Equal(want[:], sig.Sig[:macLen])
}

// verifyPools holds the pool of the MAC key last verified with.
var verifyPools atomic.Pointer[keyedPool]

type keyedPool struct {
	key  string
	pool *macPool
}

func poolFor(key []byte) *macPool {
	if p := verifyPools.Load(); p != nil && p.key == string(key) {
		return p.pool
	}
	p := &keyedPool{key: string(key), pool: newMACPool(key)}
	verifyPools.Store(p)
	return p.pool
}
