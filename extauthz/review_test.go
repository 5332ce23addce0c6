package extauthz

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	authnv1 "k8s.io/api/authentication/v1"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

func podBound() authnv1.TokenReviewStatus {
	return saStatus("wirekube-system", "wirekube-agent", agentSAUID,
		map[string]string{"pod-name": "agent-a", "pod-uid": podAUID, "node-name": "node-a"})
}

func (e *env) check(t testing.TB, token string) Decision {
	t.Helper()
	req := requestFromCheck(relayCheck(token, nil))
	return e.authz.Decide(context.Background(), req)
}

func wantReason(t testing.TB, d Decision, want contract.Reason) {
	t.Helper()
	if d.Reason != want {
		t.Fatalf("reason %q, want %q", d.Reason, want)
	}
}

func TestReviewCacheTTL(t *testing.T) {
	tests := []struct {
		name      string
		status    func() authnv1.TokenReviewStatus
		err       error
		aud       string // raw JSON aud claim of the token; empty: none
		tokenLife time.Duration
		advance   time.Duration
		want      contract.Reason
		second    contract.Reason // of the second check when it differs from want
		reviews   int64           // after a second check, advanced by advance
	}{
		{name: "success reused within cache-ttl", status: podBound, tokenLife: time.Hour, advance: 59 * time.Second, reviews: 1},
		{name: "success expires after cache-ttl", status: podBound, tokenLife: time.Hour, advance: 61 * time.Second, reviews: 2},
		{name: "token past exp denied locally, not reviewed again", status: podBound, tokenLife: 10 * time.Second, advance: 11 * time.Second,
			second: contract.ReasonTokenInvalid, reviews: 1},
		{name: "token exp within ttl reused", status: podBound, tokenLife: 10 * time.Second, advance: 9 * time.Second, reviews: 1},
		{name: "negative reused within negative ttl", status: func() authnv1.TokenReviewStatus { return authnv1.TokenReviewStatus{} },
			tokenLife: time.Hour, advance: 4 * time.Second, want: contract.ReasonTokenInvalid, reviews: 1},
		{name: "negative expires", status: func() authnv1.TokenReviewStatus { return authnv1.TokenReviewStatus{} },
			tokenLife: time.Hour, advance: 6 * time.Second, want: contract.ReasonTokenInvalid, reviews: 2},
		{name: "verified aud of another audience never reviewed", status: podBound,
			aud: `"https://kubernetes.default.svc"`, tokenLife: time.Hour, advance: 4 * time.Second, want: contract.ReasonAudienceMismatch, reviews: 0},
		{name: "verified aud list without ours never reviewed", status: podBound,
			aud: `["api"]`, tokenLife: time.Hour, advance: 6 * time.Second, want: contract.ReasonAudienceMismatch, reviews: 0},
		{name: "errors never cached", err: errFakeAPI, tokenLife: time.Hour, want: contract.ReasonReviewUnavailable, reviews: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			tok := newTokenAud(e.clock.Now().Add(tc.tokenLife), tc.aud)
			e.answers[tok] = func(string) (authnv1.TokenReviewStatus, error) {
				if tc.err != nil {
					return authnv1.TokenReviewStatus{}, tc.err
				}
				return tc.status(), nil
			}
			first := e.check(t, tok)
			wantReason(t, first, tc.want)
			if first.CacheHit {
				t.Error("first check reported a cache hit")
			}
			e.clock.Advance(tc.advance)
			second := e.check(t, tok)
			if tc.second == "" {
				tc.second = tc.want
			}
			wantReason(t, second, tc.second)
			if got := e.reviews.Load(); got != tc.reviews {
				t.Errorf("TokenReviews = %d, want %d", got, tc.reviews)
			}
			if second.CacheHit != (tc.reviews == 1 && tc.second == tc.want) {
				t.Errorf("second CacheHit = %v", second.CacheHit)
			}
		})
	}
}

func TestSingleflight(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	tok := e.answer(func(string) (authnv1.TokenReviewStatus, error) {
		<-release
		return podBound(), nil
	})
	var wg sync.WaitGroup
	var allowed atomic.Int64
	for range 100 {
		wg.Go(func() {
			if e.check(t, tok).Allowed() {
				allowed.Add(1)
			}
		})
	}
	testutil.Eventually(t, "first review to start", func() bool { return e.reviews.Load() == 1 })
	close(release)
	wg.Wait()
	if got := e.reviews.Load(); got != 1 {
		t.Errorf("TokenReviews = %d, want 1", got)
	}
	if allowed.Load() != 100 {
		t.Errorf("allowed %d of 100", allowed.Load())
	}
}

// slowAPI answers every token as pod-bound after blocking on gate, and
// records the highest number of concurrent calls.
type slowAPI struct {
	gate     chan struct{}
	cur, max atomic.Int64
}

func (s *slowAPI) answer(string) (authnv1.TokenReviewStatus, error) {
	n := s.cur.Add(1)
	defer s.cur.Add(-1)
	for {
		m := s.max.Load()
		if n <= m || s.max.CompareAndSwap(m, n) {
			break
		}
	}
	<-s.gate
	return podBound(), nil
}

func TestInflightBound(t *testing.T) {
	const bound, tokens = 4, 40
	e := newEnvDirect(t, func(o *Options) {
		o.MaxInflightReviews, o.CheckTimeout, o.MaxReviewWait = bound, time.Minute, time.Minute
	})
	api := &slowAPI{gate: make(chan struct{})}
	var wg sync.WaitGroup
	var allowed atomic.Int64
	for i := range tokens {
		tok := e.answerAgent(i, api.answer)
		wg.Go(func() {
			if e.check(t, tok).Allowed() {
				allowed.Add(1)
			}
		})
	}
	testutil.Eventually(t, "the bound to fill", func() bool { return api.cur.Load() == bound })
	close(api.gate)
	wg.Wait()
	if got := api.max.Load(); got > bound {
		t.Errorf("max concurrent TokenReviews = %d, bound %d", got, bound)
	}
	if allowed.Load() != tokens || e.reviews.Load() != tokens {
		t.Errorf("allowed %d, reviews %d, want %d each", allowed.Load(), e.reviews.Load(), tokens)
	}
}

// TestReviewThrottled: while the only TokenReview slot is held by a review
// the API has not answered, a check of another token is answered
// review_throttled when its wait for the slot is up, and the check holding
// the slot fails closed (review_unavailable) at its own deadline, before the
// API answers. In a synctest bubble: both deadlines fall at the same
// instant, and the API answers only after both checks have returned.
func TestReviewThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvDirect(t, func(o *Options) { o.MaxInflightReviews = 1; o.CheckTimeout = 200 * time.Millisecond })
		api := &slowAPI{gate: make(chan struct{})}
		defer close(api.gate) // the API answers last, after both checks returned
		slow := e.answerAgent(1, api.answer)
		done := make(chan Decision, 1)
		go func() { done <- e.check(t, slow) }()
		synctest.Wait() // the slow check's review holds the slot
		if n := api.cur.Load(); n != 1 {
			t.Fatalf("%d TokenReviews in flight, want the slow one", n)
		}
		wantReason(t, e.check(t, e.answerAgent(2, static(podBound()))), contract.ReasonReviewThrottled)
		wantReason(t, <-done, contract.ReasonReviewUnavailable)
		if n := e.reviews.Load(); n != 1 {
			t.Errorf("TokenReviews = %d, want 1 (the throttled token is never reviewed)", n)
		}
	})
}

// TestIdentityRulesOnCacheHit: the identity rules run on every check, so a
// deleted Pod, ServiceAccount or a rotated key acts at the next check even
// though the TokenReview answer is still cached.
func TestIdentityRulesOnCacheHit(t *testing.T) {
	e := newEnv(t, nil)
	agent := e.answer(static(podBound()))
	peerTok := e.answer(static(saStatus("wirekube-system", "wirekube-relay-peer-node-b", "uid-sa-peer-b", nil)))
	wantReason(t, e.check(t, agent), "")
	wantReason(t, e.check(t, peerTok), "")
	ctx := context.Background()
	must(t, e.client.CoreV1().Pods("wirekube-system").Delete(ctx, "agent-a", deleteOpts))
	testutil.Eventually(t, "pod deletion", func() bool { return e.check(t, agent).Reason == contract.ReasonPodNotFound })
	must(t, e.client.CoreV1().ServiceAccounts("wirekube-system").Delete(ctx, "wirekube-relay-peer-node-b", deleteOpts))
	testutil.Eventually(t, "sa deletion", func() bool { return e.check(t, peerTok).Reason == contract.ReasonServiceAccountNotFound })
	if got := e.reviews.Load(); got != 2 {
		t.Errorf("TokenReviews = %d, want 2 (the rest were cache hits)", got)
	}
}

func TestPeerKeyRotation(t *testing.T) {
	e := newEnv(t, nil)
	agent := e.answer(static(podBound()))
	wantReason(t, e.check(t, agent), "")
	u := peerObject("node-a", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	_, err := e.dyn.Resource(PeerGVR).Update(context.Background(), u, updateOpts)
	must(t, err)
	testutil.Eventually(t, "key rotation", func() bool {
		d := e.check(t, agent)
		return d.Allowed() && d.Headers[1].Value == u.Object["spec"].(map[string]any)["publicKey"]
	})
	must(t, e.dyn.Resource(PeerGVR).Delete(context.Background(), "node-a", deleteOpts))
	testutil.Eventually(t, "peer deletion", func() bool { return e.check(t, agent).Reason == contract.ReasonPeerNotFound })
}
