package identitysig

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// fixedMACKey is a deterministic test MAC key.
func fixedMACKey(b byte) []byte {
	k := make([]byte, MACKeyLen)
	for i := range k {
		k[i] = b ^ byte(i*7)
	}
	return k
}

// macVerifier verifies with the keys of a keys file holding mac (and no
// public key), read through FileKeys as the bridge reads it.
func macVerifier(t *testing.T, now *time.Time, mac []byte) *Verifier {
	t.Helper()
	path := filepath.Join(t.TempDir(), "identity-keys")
	if err := WriteKeys(path, nil, mac); err != nil {
		t.Fatal(err)
	}
	k := NewFileKeys(path, time.Second)
	return &Verifier{Keys: k.Lookup, MACKeys: k.LookupMAC, MaxAge: 30 * time.Second, Replay: NewReplayCache(8),
		Now: func() time.Time { return *now }}
}

// TestMACVerify: an in-Pod value verifies once with its key; every field
// altered after it was made, another key, a truncated tag and a verifier
// without MAC keys refuse it.
func TestMACVerify(t *testing.T) {
	key := fixedMACKey(1)
	good := NewMACSigner(key, func() time.Time { return t0 }).Sign(sampleFields())
	parsed, err := Parse(good)
	if err != nil || !strings.HasPrefix(good, "m1.") {
		t.Fatalf("Parse(%q) = %v; want an m1 value", good, err)
	}
	reformat := func(mod func(*Signature)) string { s := parsed; mod(&s); return Format(s) }
	for _, tc := range []struct {
		name   string
		value  string
		fields func(*Fields)
		want   contract.Reason
	}{
		{"valid", good, nil, ""},
		{"peer altered", good, func(f *Fields) { f.Peer = "node-b" }, contract.ReasonIdentitySignatureInvalid},
		{"binding altered", good, func(f *Fields) { f.Binding += "0" }, contract.ReasonIdentitySignatureInvalid},
		{"client address dropped", good, func(f *Fields) { f.ClientAddress = "" }, contract.ReasonIdentitySignatureInvalid},
		{"issue time altered", reformat(func(s *Signature) { s.IssuedAt = s.IssuedAt.Add(time.Millisecond) }), nil, contract.ReasonIdentitySignatureInvalid},
		{"nonce altered", reformat(func(s *Signature) { s.Nonce[3] ^= 1 }), nil, contract.ReasonIdentitySignatureInvalid},
		{"tag altered", reformat(func(s *Signature) { s.Sig[0] ^= 1 }), nil, contract.ReasonIdentitySignatureInvalid},
		{"tag truncated", good[:len(good)-1], nil, contract.ReasonIdentitySignatureInvalid},
		{"another key", NewMACSigner(fixedMACKey(2), func() time.Time { return t0 }).Sign(sampleFields()), nil, contract.ReasonIdentitySignatureInvalid},
		{"the tag read as a v1 signature", "v1" + good[2:], nil, contract.ReasonIdentitySignatureInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0.Add(time.Second)
			f := sampleFields()
			if tc.fields != nil {
				tc.fields(&f)
			}
			if got, err := macVerifier(t, &now, key).Verify([]string{tc.value}, f); got != tc.want {
				t.Fatalf("Verify = %q (%v), want %q", got, err, tc.want)
			}
		})
	}
	now := t0.Add(time.Second)
	v := macVerifier(t, &now, key)
	v.MACKeys = nil // a bridge that trusts public keys only
	if got, _ := v.Verify([]string{good}, sampleFields()); got != contract.ReasonIdentitySignatureInvalid {
		t.Fatalf("without MAC keys: Verify = %q, want %q", got, contract.ReasonIdentitySignatureInvalid)
	}
}

// TestMACIsHMACSHA256: the tag is HMAC-SHA256 (crypto/hmac) over the
// documented message, built here byte by byte.
func TestMACIsHMACSHA256(t *testing.T) {
	key := fixedMACKey(3)
	value := NewMACSigner(key, func() time.Time { return t0 }).Sign(sampleFields())
	parts := strings.Split(value, ".")
	nonce, _ := base64.RawURLEncoding.DecodeString(parts[3])
	var iat [8]byte
	binary.BigEndian.PutUint64(iat[:], uint64(t0.UnixMilli()))
	f := sampleFields()
	msg := []byte("wirekube-identity-mac-v1")
	for _, v := range []string{parts[1], string(iat[:]), string(nonce), f.Peer, f.PublicKey, f.Identity, f.TokenExpires, f.Binding, f.ClientAddress} {
		msg = binary.BigEndian.AppendUint32(msg, uint32(len(v)))
		msg = append(msg, v...)
	}
	h := hmac.New(sha256.New, key)
	h.Write(msg)
	if want := base64.RawURLEncoding.EncodeToString(h.Sum(nil)); parts[4] != want {
		t.Fatalf("tag %s, want HMAC-SHA256 %s", parts[4], want)
	}
	if parts[2] != "1796403600000" {
		t.Fatalf("iat %s, want 1796403600000", parts[2])
	}
}

// TestMACKeysFileIsPrivate: a keys file holding a MAC key is mode 0640 and
// one of public keys only 0644.
func TestMACKeysFileIsPrivate(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		mac  []byte
		want os.FileMode
	}{{"public keys only", nil, 0o644}, {"a MAC key", fixedMACKey(1), 0o640}} {
		path := filepath.Join(dir, tc.name)
		pubs := []ed25519.PublicKey{fixedKey(1).Public().(ed25519.PublicKey)}
		if err := WriteKeys(path, pubs, tc.mac); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != tc.want {
			t.Fatalf("%s: mode %v (%v), want %v", tc.name, st.Mode().Perm(), err, tc.want)
		}
	}
}

// TestMACSignAllocs: an in-Pod value costs one allocation, its string
// (extauthz makes one per relay allow, cache hits included).
func TestMACSignAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under -race are not the program's")
	}
	s, f := NewMACSigner(fixedMACKey(1), nil), sampleFields()
	s.Sign(f)
	if n := testing.AllocsPerRun(200, func() { s.Sign(f) }); n > 1 {
		t.Fatalf("%.0f allocations per MAC Sign, want 1", n)
	}
}

// TestCheckAllocs: checking a value of either form allocates nothing (the
// bridge checks one per upgrade; its garbage would be paid by every idle
// session's share of the heap).
func TestCheckAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under -race are not the program's")
	}
	mac, now := fixedMACKey(1), t0
	v := &Verifier{Keys: keysOf(fixedKey(1)), MACKeys: func(string, time.Time) ([]byte, error) { return mac, nil },
		MaxAge: time.Minute, Replay: NewReplayCache(1), Now: func() time.Time { return now }}
	f := sampleFields()
	for _, value := range []string{NewSigner(fixedKey(1), func() time.Time { return t0 }).Sign(f),
		NewMACSigner(mac, func() time.Time { return t0 }).Sign(f)} {
		values := []string{value}
		if n := testing.AllocsPerRun(50, func() {
			if _, reason, err := v.Check(values, f); reason != "" {
				t.Fatal(reason, err)
			}
		}); n != 0 {
			t.Errorf("%s: %.0f allocations per Check, want 0", value[:2], n)
		}
	}
}
