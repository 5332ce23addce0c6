package identitysig

import (
	"testing"
	"time"
)

// BenchmarkSign is one header value of each form: the cost extauthz pays
// per relay allow.
func BenchmarkSign(b *testing.B) {
	for _, tc := range []struct {
		name string
		s    *Signer
	}{{"ed25519", NewSigner(fixedKey(1), nil)}, {"hmac-sha256", NewMACSigner(fixedMACKey(1), nil)}} {
		b.Run(tc.name, func(b *testing.B) {
			f := sampleFields()
			b.ReportAllocs()
			for b.Loop() {
				_ = tc.s.Sign(f)
			}
		})
	}
}

// BenchmarkVerify is one check of each form (its nonce never spent, so
// each iteration verifies afresh): the cost the bridge pays per upgrade.
func BenchmarkVerify(b *testing.B) {
	mac := fixedMACKey(1)
	now := time.Now()
	pub := keysOf(fixedKey(1))
	for _, tc := range []struct {
		name  string
		value string
	}{{"ed25519", NewSigner(fixedKey(1), nil).Sign(sampleFields())}, {"hmac-sha256", NewMACSigner(mac, nil).Sign(sampleFields())}} {
		b.Run(tc.name, func(b *testing.B) {
			v := &Verifier{Keys: pub, MACKeys: func(string, time.Time) ([]byte, error) { return mac, nil },
				MaxAge: time.Minute, Replay: NewReplayCache(1), Now: func() time.Time { return now }}
			b.ReportAllocs()
			for b.Loop() {
				if _, reason, err := v.Check([]string{tc.value}, sampleFields()); reason != "" {
					b.Fatal(reason, err)
				}
			}
		})
	}
}
