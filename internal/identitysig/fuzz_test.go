package identitysig

import (
	"bytes"
	"crypto/ed25519"
	"maps"
	"slices"
	"testing"
	"time"
)

// FuzzParse: any header value either fails to parse or is the canonical
// rendering of what it parsed to (one encoding per signature).
func FuzzParse(f *testing.F) {
	good := NewSigner(fixedKey(1), func() time.Time { return t0 }).Sign(sampleFields())
	mac := NewMACSigner(fixedMACKey(1), func() time.Time { return t0 }).Sign(sampleFields())
	for _, s := range []string{good, "", "v1....", "v1.0123456789abcdef.1.AAAAAAAAAAAAAAAAAAAAAA." + good[len(good)-86:], good + "x",
		mac, "m1" + good[2:], "v1" + mac[2:], mac + "A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		sig, err := Parse(v)
		if err != nil {
			return
		}
		if back := Format(sig); back != v {
			t.Fatalf("Parse(%q) formats back as %q", v, back)
		}
	})
}

// FuzzParsePublicKeys: a keys file either fails to parse or yields keys
// whose own file parses to the same keys.
func FuzzParsePublicKeys(f *testing.F) {
	f.Add(FormatPublicKeys([]ed25519.PublicKey{fixedKey(1).Public().(ed25519.PublicKey)}))
	f.Add([]byte("# comment\n\ned25519 AAAA\n"))
	f.Add([]byte("ed25519 " + string(make([]byte, 44))))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := ParsePublicKeys(b)
		if err != nil {
			return
		}
		back, err := ParsePublicKeys(FormatPublicKeys(slices.Collect(maps.Values(keys))))
		if err != nil || !maps.EqualFunc(back, keys, func(x, y ed25519.PublicKey) bool { return x.Equal(y) }) {
			t.Fatalf("keys %v render back as %v (%v)", keys, back, err)
		}
	})
}

// FuzzParseKeys: a keys file either fails to parse or yields keys whose own
// file parses to the same keys, public and MAC alike.
func FuzzParseKeys(f *testing.F) {
	f.Add(FormatKeys([]ed25519.PublicKey{fixedKey(1).Public().(ed25519.PublicKey)}, fixedMACKey(1)))
	f.Add(FormatKeys(nil, fixedMACKey(2)))
	f.Add([]byte("hmac-sha256 AAAA\ned25519 AAAA\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ks, err := ParseKeys(b)
		if err != nil || len(ks.MAC) > 1 {
			return // extauthz writes at most one MAC key; FormatKeys renders one
		}
		var mac []byte
		for _, k := range ks.MAC {
			mac = k
		}
		back, err := ParseKeys(FormatKeys(slices.Collect(maps.Values(ks.Public)), mac))
		if err != nil || !maps.EqualFunc(back.Public, ks.Public, func(x, y ed25519.PublicKey) bool { return x.Equal(y) }) ||
			!maps.EqualFunc(back.MAC, ks.MAC, bytes.Equal) {
			t.Fatalf("keys %v render back as %v (%v)", ks, back, err)
		}
	})
}
