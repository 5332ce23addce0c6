package identitysig

import (
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
	for _, s := range []string{good, "", "v1....", "v1.0123456789abcdef.1.AAAAAAAAAAAAAAAAAAAAAA." + good[len(good)-86:], good + "x"} {
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
