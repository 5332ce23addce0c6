package extauthz

import (
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// TestReviewCacheCappedAtTokenExp: docs/extauthz.md promises that an
// accepted TokenReview is reused for --cache-ttl (60 s by default) and never
// past the token's own exp. A token expiring 10 s after the check must not
// leave an answer that outlives it; a token expiring in an hour keeps the
// answer for the cache TTL. The instants are written down from the clock,
// not read from the code under test. (A check after exp is refused before
// the cache is consulted, so only the entry shows the cap.)
func TestReviewCacheCappedAtTokenExp(t *testing.T) {
	tests := []struct {
		name      string
		tokenLife time.Duration
		want      time.Duration // the entry's lifetime from the check
	}{
		{"exp before cache-ttl caps the entry", 10 * time.Second, 10 * time.Second},
		{"exp after cache-ttl: the ttl", time.Hour, 60 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.CacheTTL = 60 * time.Second })
			start := e.clock.Now()
			tok := e.answerToken(newToken(start.Add(tc.tokenLife)), static(podBound()))
			wantReason(t, e.check(t, tok), contract.Reason(""))
			r := e.authz.reviewer
			expires, ok := r.Expires(r.Key(tok))
			if !ok {
				t.Fatal("an accepted TokenReview was not cached")
			}
			if want := start.Add(tc.want); !expires.Equal(want) {
				t.Errorf("cached answer expires at %s, want %s", expires, want)
			}
			e.clock.Advance(tc.want - time.Second)
			if _, hit := r.Cached(r.Key(tok)); !hit {
				t.Errorf("no cached answer 1 s before %s", tc.want)
			}
			e.clock.Advance(time.Second)
			if _, hit := r.Cached(r.Key(tok)); hit {
				t.Errorf("a cached answer at %s", tc.want)
			}
		})
	}
}
