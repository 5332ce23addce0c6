package extauthz

import (
	"context"
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/extauthz/internal/jwks"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenverify"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

var b64 = base64.RawURLEncoding

// forgeExpOnly is the forged-token attacker's token: a random kid, a numeric
// exp claim and a random signature.
func forgeExpOnly(exp time.Time) string {
	hdr := fmt.Sprintf(`{"alg":"RS256","typ":"JWT","kid":%q}`, rand.Text())
	payload := fmt.Sprintf(`{"exp":%d,"jti":%q}`, exp.Unix(), rand.Text())
	sig := make([]byte, 256)
	_, _ = rand.Read(sig)
	tok := b64.EncodeToString([]byte(hdr)) + "." + b64.EncodeToString([]byte(payload)) + "." + b64.EncodeToString(sig)
	suiteTokens.Store(tok, true)
	return tok
}

// resign replaces the header of a signed token and signs the result with
// sign (nil: keep the old signature).
func rawToken(hdr, payload string, sig []byte) string {
	tok := b64.EncodeToString([]byte(hdr)) + "." + payload + "." + b64.EncodeToString(sig)
	suiteTokens.Store(tok, true)
	return tok
}

func payloadOf(tok string) string { return strings.Split(tok, ".")[1] }

// verifyTokens are the local verification cases, by name, for a clock at
// now; "valid" and "no-kid" verify, every other one fails.
func verifyTokens(now time.Time) map[string]string {
	aud := []string{contract.DefaultAudience}
	exp := now.Add(time.Hour)
	empty := ""
	valid := tokenSpec{aud: aud, exp: exp, iat: now, nbf: now}.sign()
	pub, _ := x509.MarshalPKIXPublicKey(&keyFor("test").priv.PublicKey)
	mac := hmac.New(sha256.New, pub)
	hsHdr := b64.EncodeToString([]byte(`{"alg":"HS256","kid":"test"}`))
	mac.Write([]byte(hsHdr + "." + payloadOf(valid)))
	other := keyFor("other")
	parts := strings.Split(valid, ".")
	forgedPayload := b64.EncodeToString([]byte(strings.Replace(mustDecode(parts[1]), "wirekube-agent", "wirekube-relay-peer-node-b", 2)))
	return map[string]string{
		"valid":            valid,
		"no-kid":           tokenSpec{aud: aud, exp: exp, kid: &empty}.sign(),
		"other-key":        tokenSpec{aud: aud, exp: exp, key: &signingKey{kid: "test", priv: other.priv}}.sign(),
		"unknown-kid":      tokenSpec{aud: aud, exp: exp, key: keyFor("rogue")}.sign(),
		"no-kid-other-key": tokenSpec{aud: aud, exp: exp, key: other, kid: &empty}.sign(),
		"alg-none":         rawToken(`{"alg":"none","kid":"test"}`, payloadOf(valid), []byte("none-signature")),
		"alg-hs256":        rawToken(`{"alg":"HS256","kid":"test"}`, payloadOf(valid), mac.Sum(nil)),
		"tampered":         parts[0] + "." + forgedPayload + "." + parts[2],
		"other-issuer":     tokenSpec{aud: aud, exp: exp, issuer: "https://other.example.com"}.sign(),
		"not-yet":          tokenSpec{aud: aud, exp: exp, nbf: now.Add(10 * time.Minute)}.sign(),
		"no-aud":           tokenSpec{exp: exp}.sign(),
		"no-exp-claim":     tokenSpec{aud: aud}.sign(),
		"expired-signed":   tokenSpec{aud: aud, exp: now.Add(-time.Second)}.sign(),
	}
}

func mustDecode(s string) string {
	b, err := b64.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// newTestVerifier is a verifier over the fake discovery's keys, loaded.
func newTestVerifier(t testing.TB, disc *fakeDiscovery, now func() time.Time) *tokenverify.Verifier {
	t.Helper()
	ks, err := jwks.New(jwks.Config{Fetch: disc.fetch, Interval: time.Hour, MinRefresh: 10 * time.Second, Now: now,
		Log: slog.New(slog.NewJSONHandler(suiteLog, nil)), Reg: prometheus.NewRegistry()})
	must(t, err)
	must(t, ks.Refresh(context.Background(), "periodic"))
	return tokenverify.New(ks, contract.DefaultAudience, now)
}

func TestVerify(t *testing.T) {
	clock := testutil.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	v := newTestVerifier(t, newFakeDiscovery("test"), clock.Now)
	toks := verifyTokens(clock.Now())
	tests := []struct {
		name   string
		reason contract.Reason
		detail string
	}{
		{"valid", "", ""},
		{"no-kid", "", ""},
		{"other-key", contract.ReasonTokenSignatureInvalid, tokenverify.DetailSignature},
		{"unknown-kid", contract.ReasonTokenSignatureInvalid, tokenverify.DetailKidUnknown},
		{"no-kid-other-key", contract.ReasonTokenSignatureInvalid, tokenverify.DetailSignature},
		{"alg-none", contract.ReasonTokenSignatureInvalid, tokenverify.DetailParse},
		{"alg-hs256", contract.ReasonTokenSignatureInvalid, tokenverify.DetailParse},
		{"tampered", contract.ReasonTokenSignatureInvalid, tokenverify.DetailSignature},
		{"other-issuer", contract.ReasonTokenInvalid, tokenverify.DetailIssuer},
		{"not-yet", contract.ReasonTokenInvalid, tokenverify.DetailNotYet},
		{"no-aud", contract.ReasonAudienceMismatch, tokenverify.DetailAudience},
		{"no-exp-claim", contract.ReasonTokenInvalid, tokenverify.DetailExpired},
		{"expired-signed", contract.ReasonTokenInvalid, tokenverify.DetailExpired},
	}
	if len(tests) != len(toks) {
		t.Fatalf("%d cases for %d tokens", len(tests), len(toks))
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, reason, detail := v.Verify(context.Background(), toks[tc.name])
			if reason != tc.reason || detail != tc.detail {
				t.Fatalf("verify = %q (%s), want %q (%s)", reason, detail, tc.reason, tc.detail)
			}
			// Claims come with an allow, and with an expired token (whose
			// node the log line and the Event name), never otherwise.
			if (c != nil) != (tc.reason == "" || tc.detail == tokenverify.DetailExpired) {
				t.Errorf("claims %v with reason %q (%s)", c, reason, detail)
			}
		})
	}
}

// TestVerifyLeeway: nbf and iat a little ahead of this host's clock pass
// (clock skew); exp gets no leeway.
func TestVerifyLeeway(t *testing.T) {
	clock := testutil.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	v := newTestVerifier(t, newFakeDiscovery("test"), clock.Now)
	aud := []string{contract.DefaultAudience}
	now := clock.Now()
	tests := []struct {
		name string
		spec tokenSpec
		want contract.Reason
	}{
		{"nbf 30s ahead", tokenSpec{aud: aud, exp: now.Add(time.Hour), nbf: now.Add(30 * time.Second)}, ""},
		{"iat 30s ahead", tokenSpec{aud: aud, exp: now.Add(time.Hour), iat: now.Add(30 * time.Second)}, ""},
		{"iat 2m ahead", tokenSpec{aud: aud, exp: now.Add(time.Hour), iat: now.Add(2 * time.Minute)}, contract.ReasonTokenInvalid},
		{"exp now", tokenSpec{aud: aud, exp: now}, contract.ReasonTokenInvalid},
		{"exp in 1s", tokenSpec{aud: aud, exp: now.Add(time.Second)}, ""},
		{"aud string", tokenSpec{aud: contract.DefaultAudience, exp: now.Add(time.Hour)}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, reason, detail := v.Verify(context.Background(), tc.spec.sign()); reason != tc.want {
				t.Fatalf("verify = %q (%s), want %q", reason, detail, tc.want)
			}
		})
	}
}

// TestForgedTokensCostNoReview: no forged token reaches TokenReview, and a
// storm of unknown kids fetches the JWKS at most once per min interval.
func TestForgedTokensCostNoReview(t *testing.T) {
	// 400 failures from one address: the per-address failure limit
	// (TestSourceFailureLimit) would answer most of them itself.
	e := newEnvDirect(t, func(o *Options) { o.SourceFailureBurst = 0 })
	fetches := e.disc.fetches.Load()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				d := e.check(t, forgeExpOnly(e.clock.Now().Add(time.Hour)))
				if d.Reason != contract.ReasonTokenSignatureInvalid {
					t.Errorf("forged token: %q, want %s", d.Reason, contract.ReasonTokenSignatureInvalid)
				}
			}
		})
	}
	wg.Wait()
	if n := e.reviews.Load(); n != 0 {
		t.Errorf("%d TokenReviews for forged tokens, want 0", n)
	}
	if n := e.disc.fetches.Load() - fetches; n != 1 {
		t.Errorf("%d JWKS fetches for 400 unknown kids within the min interval, want 1", n)
	}
	e.clock.Advance(11 * time.Second)
	e.check(t, forgeExpOnly(e.clock.Now().Add(time.Hour)))
	if n := e.disc.fetches.Load() - fetches; n != 2 {
		t.Errorf("%d JWKS fetches after the min interval, want 2", n)
	}
}

// TestKeyRotation: a token of a new key verifies after one refresh; the old
// key's tokens verify until a refresh drops the key.
func TestKeyRotation(t *testing.T) {
	e := newEnv(t, nil)
	bound := static(podBound())
	aud := []string{contract.DefaultAudience}
	oldTok := e.answerToken(tokenSpec{aud: aud, exp: e.clock.Now().Add(time.Hour)}.sign(), bound)
	wantReason(t, e.check(t, oldTok), "")
	e.disc.setKeys("test", "rotated")
	base := e.disc.fetches.Load()
	newTok := e.answerToken(tokenSpec{aud: aud, exp: e.clock.Now().Add(time.Hour), key: keyFor("rotated")}.sign(), bound)
	wantReason(t, e.check(t, newTok), "")
	wantReason(t, e.check(t, e.answerToken(tokenSpec{aud: aud, exp: e.clock.Now().Add(time.Hour), key: keyFor("rotated")}.sign(), bound)), "")
	if n := e.disc.fetches.Load() - base; n != 1 {
		t.Errorf("%d JWKS fetches for the new kid, want 1", n)
	}
	e.disc.setKeys("rotated")
	e.clock.Advance(61 * time.Second) // past the review cache TTL
	wantReason(t, e.check(t, oldTok), "")
	must(t, e.authz.keys.Refresh(context.Background(), "periodic"))
	wantReason(t, e.check(t, oldTok), contract.ReasonTokenSignatureInvalid)
	wantReason(t, e.check(t, newTok), "")
}

// TestKeysNotLoaded: without a key set every token is review_unavailable
// (fail closed), and nothing reaches TokenReview.
func TestKeysNotLoaded(t *testing.T) {
	clock := testutil.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	disc := newFakeDiscovery("test")
	disc.setErr(fmt.Errorf("fake discovery: connection refused"))
	ks, err := jwks.New(jwks.Config{Fetch: disc.fetch, Interval: time.Hour, MinRefresh: time.Second, Now: clock.Now,
		Log: slog.New(slog.NewJSONHandler(suiteLog, nil)), Reg: prometheus.NewRegistry()})
	must(t, err)
	if ks.Refresh(context.Background(), "periodic") == nil || ks.Loaded() {
		t.Fatal("refresh succeeded against a failing API")
	}
	v := tokenverify.New(ks, contract.DefaultAudience, clock.Now)
	if _, reason, _ := v.Verify(context.Background(), verifyTokens(clock.Now())["valid"]); reason != contract.ReasonReviewUnavailable {
		t.Fatalf("verify without keys = %q, want %s", reason, contract.ReasonReviewUnavailable)
	}
}

func TestParseJWKS(t *testing.T) {
	d := newFakeDiscovery("a", "b")
	good, err := d.fetch(context.Background(), jwks.JWKSPath)
	must(t, err)
	tests := []struct {
		name string
		body string
		keys int
	}{
		{"two rsa keys", string(good), 2},
		{"empty set", `{"keys":[]}`, 0},
		{"not json", `<html>`, 0},
		{"symmetric key skipped", `{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"s"}]}`, 0},
		{"encryption key skipped", strings.Replace(string(good), `"use":"sig"`, `"use":"enc"`, 1), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := jwks.ParseJWKS([]byte(tc.body))
			if tc.keys == 0 {
				if err == nil {
					t.Fatalf("parsed %d keys, want an error", st.Len())
				}
				return
			}
			must(t, err)
			if st.Len() != tc.keys {
				t.Errorf("%d keys, want %d", st.Len(), tc.keys)
			}
		})
	}
}

// FuzzVerify: no input panics, and an accepted token's signature verifies
// over its exact signing input with the published key (the oracle is
// crypto/rsa, not go-jose).
func FuzzVerify(f *testing.F) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tok := range verifyTokens(now) {
		f.Add(tok)
	}
	f.Add(forgeExpOnly(now.Add(time.Hour)))
	f.Add("e30.e30.e30")
	clock := testutil.NewClock(now)
	disc := newFakeDiscovery("test")
	ks, err := jwks.New(jwks.Config{Fetch: disc.fetch, Interval: time.Hour, MinRefresh: 24 * time.Hour, Now: clock.Now,
		Log: slog.New(slog.DiscardHandler), Reg: prometheus.NewRegistry()})
	must(f, err)
	must(f, ks.Refresh(context.Background(), "periodic"))
	// One unknown-kid refresh now: with the clock still, no other runs, so
	// the fuzzer never reaches the fake API.
	ks.RefreshUnknown(context.Background())
	v := tokenverify.New(ks, contract.DefaultAudience, clock.Now)
	pub := &keyFor("test").priv.PublicKey
	f.Fuzz(func(t *testing.T, tok string) {
		c, reason, _ := v.Verify(context.Background(), tok)
		if reason == "" {
			if c == nil {
				t.Fatal("accepted without claims")
			}
			i := strings.LastIndexByte(tok, '.')
			sig, err := b64.DecodeString(tok[i+1:])
			sum := sha256.Sum256([]byte(tok[:i]))
			if err != nil || rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) != nil {
				t.Fatalf("accepted a token whose signature does not verify: %q", tok)
			}
		}
	})
}

// TestSignatureDenyRevealsNothing: whichever local check refused a badly
// signed token, the HTTP answer is byte for byte the same (status, headers,
// body); only the log line's detail tells them apart.
func TestSignatureDenyRevealsNothing(t *testing.T) {
	e := newEnv(t, nil)
	srv := httptest.NewServer(&HTTPHandler{Authorizer: e.authz})
	defer srv.Close()
	toks := verifyTokens(e.clock.Now())
	var first string
	for _, name := range []string{"other-key", "unknown-kid", "no-kid-other-key", "alg-none", "alg-hs256", "tampered"} {
		req, err := http.NewRequest("GET", srv.URL+"/auth", nil)
		must(t, err)
		req.Header = http.Header{"Authorization": {"Bearer " + toks[name]}, "X-Original-Uri": {"/relay"},
			"X-Original-Method": {"GET"}, "Upgrade": {"websocket"}, "Connection": {"upgrade"}}
		resp, err := srv.Client().Do(req)
		must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Header.Del("Date")
		got := fmt.Sprintf("%d %v %q", resp.StatusCode, resp.Header, body)
		if first == "" {
			first = got
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(got, string(contract.ReasonTokenSignatureInvalid)) {
				t.Fatalf("%s: %s, want 401 %s", name, got, contract.ReasonTokenSignatureInvalid)
			}
			continue
		}
		if got != first {
			t.Errorf("%s answered %s, the first case %s", name, got, first)
		}
	}
}

// TestVerifyRefusesAmbiguousClaims: the verifier refuses a validly signed payload whose claim names
// are repeated or case variants, so no claim it returns can be read two ways.
func TestVerifyRefusesAmbiguousClaims(t *testing.T) {
	e := newEnv(t, nil)
	exp := e.clock.Now().Add(time.Hour)
	for name, extra := range map[string]string{
		"EXP":    fmt.Sprintf(`,"EXP":%d`, exp.Add(24*time.Hour).Unix()),
		"exp":    fmt.Sprintf(`,"exp":%d`, exp.Add(24*time.Hour).Unix()),
		"Issuer": `,"ISS":"https://other.example"`,
	} {
		c, reason, detail := e.authz.verifier.Verify(context.Background(), signRaw(ambiguousPayload(exp, extra)))
		if reason != contract.ReasonTokenMalformed || c != nil || detail != tokenverify.DetailClaims {
			t.Errorf("%s: claims %v, reason %q (%s), want token_malformed (claims)", name, c, reason, detail)
		}
	}
	if c, reason, _ := e.authz.verifier.Verify(context.Background(), signRaw(ambiguousPayload(exp, ""))); reason != "" || !c.Claims.Expiry.Time().Equal(exp.Truncate(time.Second)) {
		t.Errorf("unambiguous payload: reason %q, claims %+v", reason, c)
	}
}
