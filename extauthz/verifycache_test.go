package extauthz

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/extauthz/internal/tokenverify"
	"github.com/wirekube/relay-ws/internal/contract"
)

// TestCachedVerificationFollowsKeySet: a cached answer is served without a
// new signature check only while the key that verified the token (its kid
// and its key material) and the token's issuer are still published; a
// refresh that drops either ends it at the next check, which makes no API
// call and drops the cached answer.
func TestCachedVerificationFollowsKeySet(t *testing.T) {
	tests := []struct {
		name   string
		change func(d *fakeDiscovery)
		want   contract.Reason
	}{
		{"same keys fetched again", func(*fakeDiscovery) {}, ""},
		{"another key added", func(d *fakeDiscovery) { d.setKeys("test", "rotated") }, ""},
		{"key removed", func(d *fakeDiscovery) { d.setKeys("rotated") }, contract.ReasonTokenSignatureInvalid},
		{"kid names another key", func(d *fakeDiscovery) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.keys = []*signingKey{{kid: "test", priv: keyFor("rotated").priv}}
		}, contract.ReasonTokenSignatureInvalid},
		{"issuer changed", func(d *fakeDiscovery) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.issuer = "https://other-issuer.example.com"
		}, contract.ReasonTokenInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			tok := e.answer(static(podBound()))
			wantReason(t, e.check(t, tok), "")
			tc.change(e.disc)
			must(t, e.authz.keys.Refresh(context.Background(), "periodic"))
			d := e.check(t, tok)
			wantReason(t, d, tc.want)
			if n := e.reviews.Load(); n != 1 {
				t.Errorf("%d TokenReviews, want 1 (the first check's)", n)
			}
			_, cached := e.authz.reviewer.Expires(e.authz.reviewer.Key(tok))
			if tc.want == "" && (!d.CacheHit || !cached) {
				t.Errorf("cache hit %v, answer cached %v: want both", d.CacheHit, cached)
			}
			if tc.want != "" && cached {
				t.Error("the answer of a token that no longer verifies is still cached")
			}
		})
	}
}

// TestCachedAnswerChecksExp: exp is checked on every cache hit, even for a
// cached answer that outlives the token.
func TestCachedAnswerChecksExp(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.answerToken(newToken(e.clock.Now().Add(10*time.Second)), static(podBound()))
	wantReason(t, e.check(t, tok), "")
	r := e.authz.reviewer
	k := r.Key(tok)
	if _, ok := r.Expires(k); !ok {
		t.Fatal("answer not cached")
	}
	r.SetExpires(k, e.clock.Now().Add(time.Hour))
	e.clock.Advance(10 * time.Second)
	d := e.check(t, tok)
	wantReason(t, d, contract.ReasonTokenInvalid)
	if d.Detail != tokenverify.DetailExpired {
		t.Errorf("detail %q, want %q", d.Detail, tokenverify.DetailExpired)
	}
}

// TestCachedAnswerNeedsTheSameToken: the cached answer of a token is never
// served to a token that differs only in its signature; the forgery costs
// no API call.
func TestCachedAnswerNeedsTheSameToken(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.answer(static(podBound()))
	wantReason(t, e.check(t, tok), "")
	sig := make([]byte, 256)
	_, _ = rand.Read(sig)
	forged := tok[:strings.LastIndexByte(tok, '.')+1] + b64.EncodeToString(sig)
	suiteTokens.Store(forged, true)
	d := e.check(t, forged)
	wantReason(t, d, contract.ReasonTokenSignatureInvalid)
	if d.Detail != tokenverify.DetailSignature {
		t.Errorf("detail %q, want %q", d.Detail, tokenverify.DetailSignature)
	}
	if n := e.reviews.Load(); n != 1 {
		t.Errorf("%d TokenReviews, want 1 (the genuine token's)", n)
	}
}
