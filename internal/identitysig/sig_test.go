package identitysig

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// fixedKey is a deterministic test key (seed 0x01 0x02 ...).
func fixedKey(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b + byte(i)
	}
	return ed25519.NewKeyFromSeed(seed)
}

func sampleFields() Fields {
	return Fields{Peer: "node-a", PublicKey: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		Identity: "system:serviceaccount:wirekube-system:wirekube-agent", TokenExpires: "2026-12-04T18:00:00Z",
		Binding:       "v1;sa=system:serviceaccount:wirekube-system:wirekube-agent;sauid=u;pod=p;poduid=pu;node=n;nodeuid=nu;peer=node-a;key=00",
		ClientAddress: "203.0.113.7"}
}

// keysOf is a KeyLookup holding exactly the public halves of privs.
func keysOf(privs ...ed25519.PrivateKey) KeyLookup {
	m := map[string]ed25519.PublicKey{}
	for _, p := range privs {
		pub := p.Public().(ed25519.PublicKey)
		m[KeyID(pub)] = pub
	}
	return func(kid string, _ time.Time) (ed25519.PublicKey, error) {
		if k, ok := m[kid]; ok {
			return k, nil
		}
		return nil, ErrUnknownKey
	}
}

var t0 = time.Date(2026, 12, 4, 17, 0, 0, 0, time.UTC)

func newVerifier(now *time.Time, privs ...ed25519.PrivateKey) *Verifier {
	return &Verifier{Keys: keysOf(privs...), MaxAge: 30 * time.Second, Replay: NewReplayCache(8),
		Now: func() time.Time { return *now }}
}

// TestVerify: every field the signature covers, altered after signing,
// makes it invalid; each other reason comes from its own condition.
func TestVerify(t *testing.T) {
	key, other := fixedKey(1), fixedKey(7)
	signedAt := func(k ed25519.PrivateKey, at time.Time) string {
		return NewSigner(k, func() time.Time { return at }).Sign(sampleFields())
	}
	good := signedAt(key, t0)
	parsed, _ := Parse(good)
	reformat := func(mod func(*Signature)) string { s := parsed; mod(&s); return Format(s) }
	for _, tc := range []struct {
		name   string
		values []string
		fields func(*Fields)
		at     time.Duration // verification time after t0
		want   contract.Reason
	}{
		{"valid", []string{good}, nil, time.Second, ""},
		{"valid exactly max age old", []string{good}, nil, 30 * time.Second, ""},
		{"valid from the near future", []string{good}, nil, -MaxFutureSkew, ""},
		{"missing", nil, nil, 0, contract.ReasonIdentitySignatureMissing},
		{"repeated", []string{good, good}, nil, 0, contract.ReasonIdentitySignatureInvalid},
		{"empty", []string{""}, nil, 0, contract.ReasonIdentitySignatureInvalid},
		{"peer altered", []string{good}, func(f *Fields) { f.Peer = "node-b" }, 0, contract.ReasonIdentitySignatureInvalid},
		{"key altered", []string{good}, func(f *Fields) { f.PublicKey = strings.Replace(f.PublicKey, "A", "B", 1) }, 0, contract.ReasonIdentitySignatureInvalid},
		{"identity altered", []string{good}, func(f *Fields) { f.Identity += "x" }, 0, contract.ReasonIdentitySignatureInvalid},
		{"expiry altered", []string{good}, func(f *Fields) { f.TokenExpires = "2027-12-04T18:00:00Z" }, 0, contract.ReasonIdentitySignatureInvalid},
		{"binding altered", []string{good}, func(f *Fields) { f.Binding = "" }, 0, contract.ReasonIdentitySignatureInvalid},
		{"client address altered", []string{good}, func(f *Fields) { f.ClientAddress = "198.51.100.9" }, 0, contract.ReasonIdentitySignatureInvalid},
		{"client address dropped", []string{good}, func(f *Fields) { f.ClientAddress = "" }, 0, contract.ReasonIdentitySignatureInvalid},
		{"client address moved into the binding", []string{good}, func(f *Fields) { f.Binding += f.ClientAddress; f.ClientAddress = "" }, 0, contract.ReasonIdentitySignatureInvalid},
		{"fields shifted between headers", []string{good}, func(f *Fields) { f.Peer, f.Identity = f.Peer+f.Identity[:1], f.Identity[1:] }, 0, contract.ReasonIdentitySignatureInvalid},
		{"issue time altered", []string{reformat(func(s *Signature) { s.IssuedAt = s.IssuedAt.Add(time.Millisecond) })}, nil, 0, contract.ReasonIdentitySignatureInvalid},
		{"nonce altered", []string{reformat(func(s *Signature) { s.Nonce[0] ^= 1 })}, nil, 0, contract.ReasonIdentitySignatureInvalid},
		{"signature altered", []string{reformat(func(s *Signature) { s.Sig[10] ^= 1 })}, nil, 0, contract.ReasonIdentitySignatureInvalid},
		{"key id of another key", []string{reformat(func(s *Signature) { s.KeyID = KeyID(other.Public().(ed25519.PublicKey)) })}, nil, 0, contract.ReasonIdentitySignatureInvalid},
		{"unknown key", []string{signedAt(fixedKey(9), t0)}, nil, 0, contract.ReasonIdentitySignatureInvalid},
		{"version 2", []string{"v2" + good[2:]}, nil, 0, contract.ReasonIdentitySignatureInvalid},
		{"stale", []string{good}, nil, 30*time.Second + time.Millisecond, contract.ReasonIdentitySignatureStale},
		{"from the far future", []string{good}, nil, -MaxFutureSkew - time.Millisecond, contract.ReasonIdentitySignatureStale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0.Add(tc.at)
			v := newVerifier(&now, key, other)
			f := sampleFields()
			if tc.fields != nil {
				tc.fields(&f)
			}
			got, err := v.Verify(tc.values, f)
			if got != tc.want {
				t.Fatalf("Verify = %q (%v), want %q", got, err, tc.want)
			}
			if (got == "") != (err == nil) {
				t.Fatalf("reason %q with error %v", got, err)
			}
		})
	}
}

// TestVerifyReplay: a header value accepted once is refused the second
// time, even with the same fields; another signature of the same fields
// (a fresh nonce) is accepted.
func TestVerifyReplay(t *testing.T) {
	key := fixedKey(1)
	now := t0
	v := newVerifier(&now, key)
	s := NewSigner(key, func() time.Time { return t0 })
	first := s.Sign(sampleFields())
	steps := []struct {
		value string
		want  contract.Reason
	}{{first, ""}, {first, contract.ReasonIdentitySignatureReplayed}, {s.Sign(sampleFields()), ""}}
	for i, st := range steps {
		if got, err := v.Verify([]string{st.value}, sampleFields()); got != st.want {
			t.Fatalf("step %d: Verify = %q (%v), want %q", i, got, err, st.want)
		}
	}
}

// TestReplayWindow (synctest): a nonce is remembered until its signature
// is stale, then forgotten; the replay within the window is refused as a
// replay, the one after it as stale, and the cache is empty again.
func TestReplayWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		key := fixedKey(1)
		v := &Verifier{Keys: keysOf(key), MaxAge: 30 * time.Second, Replay: NewReplayCache(4)}
		value := NewSigner(key, nil).Sign(sampleFields())
		want := func(step string, r contract.Reason) {
			t.Helper()
			if got, err := v.Verify([]string{value}, sampleFields()); got != r {
				t.Fatalf("%s: Verify = %q (%v), want %q", step, got, err, r)
			}
		}
		want("first", "")
		time.Sleep(30 * time.Second)
		want("at max age", contract.ReasonIdentitySignatureReplayed)
		time.Sleep(time.Millisecond)
		want("after max age", contract.ReasonIdentitySignatureStale)
		// Another accepted signature expires the old nonce on its way in.
		if got, err := v.Verify([]string{NewSigner(key, nil).Sign(sampleFields())}, sampleFields()); got != "" {
			t.Fatalf("fresh: %q (%v)", got, err)
		}
		if n := v.Replay.Len(); n != 1 {
			t.Fatalf("cache holds %d nonces, want 1 (the expired one dropped)", n)
		}
	})
}

// TestReplayCacheBound: a full cache refuses new nonces (never forgets a
// live one to make room) until the oldest expire.
func TestReplayCacheBound(t *testing.T) {
	c := NewReplayCache(2)
	n := func(b byte) (x [NonceLen]byte) { x[0] = b; return x }
	steps := []struct {
		nonce byte
		until time.Duration
		at    time.Duration
		want  error
	}{
		{1, 10 * time.Second, 0, nil},
		{2, 5 * time.Second, 0, nil}, // kept as long as nonce 1 (10 s): expiries never decrease
		{3, 10 * time.Second, 0, ErrCacheFull},
		{1, 10 * time.Second, 9 * time.Second, ErrReplayed},
		{3, 20 * time.Second, 9 * time.Second, ErrCacheFull}, // nonce 2 still held at 9 s
		{3, 20 * time.Second, 10*time.Second + 1, nil},       // both expired
		{2, 20 * time.Second, 10*time.Second + 1, nil},
	}
	for i, st := range steps {
		err := c.Add(n(st.nonce), t0.Add(st.until), t0.Add(st.at))
		if !errors.Is(err, st.want) || (st.want == nil && err != nil) {
			t.Fatalf("step %d: Add(%d) = %v, want %v", i, st.nonce, err, st.want)
		}
	}
	if got := c.Len(); got != 2 {
		t.Fatalf("Len = %d, want 2", got)
	}
}

// TestParse: the canonical form only.
func TestParse(t *testing.T) {
	good := NewSigner(fixedKey(1), func() time.Time { return t0 }).Sign(sampleFields())
	parts := strings.Split(good, ".")
	join := func(i int, v string) string {
		p := append([]string(nil), parts...)
		p[i] = v
		return strings.Join(p, ".")
	}
	for _, tc := range []struct{ name, v string }{
		{"too long", good + strings.Repeat("A", MaxHeaderLen)},
		{"four parts", strings.Join(parts[:4], ".")},
		{"six parts", good + ".x"},
		{"key id upper case", join(1, strings.ToUpper(parts[1]))},
		{"key id short", join(1, parts[1][:15])},
		{"issue time signed", join(2, "+"+parts[2])},
		{"issue time leading zero", join(2, "0"+parts[2])},
		{"issue time not a number", join(2, "17x")},
		{"issue time too long", join(2, "12345678901234567")},
		{"nonce padded", join(3, parts[3]+"==")},
		{"nonce short", join(3, parts[3][:21])},
		{"nonce standard base64", join(3, strings.NewReplacer("-", "+", "_", "/").Replace(parts[3])+"+")},
		{"signature short", join(4, parts[4][:85])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse(tc.v); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q) = %v, want ErrMalformed", tc.v, err)
			}
		})
	}
	sig, err := Parse(good)
	if err != nil || Format(sig) != good || !sig.IssuedAt.Equal(t0) {
		t.Fatalf("Parse(good) = %+v, %v; Format = %q", sig, err, Format(sig))
	}
}

// TestNonTrailingBitsRejected: the last nonce character may carry only
// zero padding bits; another character decoding to the same bytes is
// another encoding of the same nonce and must not pass as a fresh one.
func TestNonTrailingBitsRejected(t *testing.T) {
	good := NewSigner(fixedKey(1), nil).Sign(sampleFields())
	parts := strings.Split(good, ".")
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	// The 22nd character carries 2 bits of the nonce and 4 padding bits
	// (zero in the canonical form): setting one padding bit decodes to the
	// same 16 bytes.
	alt := alphabet[strings.IndexByte(alphabet, parts[3][21])|1]
	parts[3] = parts[3][:21] + string(alt)
	if _, err := Parse(strings.Join(parts, ".")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a nonce with non-zero padding bits parsed: %v", err)
	}
}

// TestMessageWithoutClientAddress: a field set without a client address
// is signed over exactly the five fields an extauthz that predates the client
// address signed, so its signatures still verify; the bytes are written out here
// from the format's description, not from Message.
func TestMessageWithoutClientAddress(t *testing.T) {
	var nonce [NonceLen]byte
	nonce[0] = 9
	f := Fields{Peer: "p", PublicKey: "k", Identity: "i", TokenExpires: "t", Binding: ""}
	want := []byte("wirekube-identity-signature-v1")
	want = append(want, 0, 0, 0, 3, 'k', 'i', 'd')
	want = append(want, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0x01, 0x02)
	want = append(want, 0, 0, 0, 16)
	want = append(want, nonce[:]...)
	for _, v := range []string{"p", "k", "i", "t"} {
		want = append(want, 0, 0, 0, 1, v[0])
	}
	want = append(want, 0, 0, 0, 0)
	if got := Message("kid", 0x0102, nonce, f); string(got) != string(want) {
		t.Fatalf("Message without a client address:\n got %x\nwant %x", got, want)
	}
	f.ClientAddress = "::1"
	want = append(want, 0, 0, 0, 3, ':', ':', '1')
	if got := Message("kid", 0x0102, nonce, f); string(got) != string(want) {
		t.Fatalf("Message with a client address:\n got %x\nwant %x", got, want)
	}
}
