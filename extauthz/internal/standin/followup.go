package standin

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/extauthz/internal/reviewafter"
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenreview"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenverify"
	"github.com/wirekube/relay-ws/internal/revocation"
)

// What to do when the review gate cannot serve a check within
// --max-review-wait (--on-review-throttled).
const (
	// ThrottledDeny answers review_throttled (503): the agent retries after
	// its backoff. The default: every admission is reviewed first.
	ThrottledDeny = "deny"
	// ThrottledReviewAfter admits a relay upgrade whose token verifies
	// locally and whose Pod, Node and WireKubePeer the informers confirm
	// (the checks of verify-offline), and owes it a TokenReview made
	// afterwards in the gate's turn: when that review refuses the token,
	// names another identity or cannot be made, the session is revoked
	// (token_invalid). A replica lost or drained then costs its agents
	// their first retry instead of a backoff that doubles on every
	// review_throttled, for the same one TokenReview each.
	ThrottledReviewAfter = "review-after"
)

// Bounds of the follow-up reviews.
const (
	// followUpWait is how long a follow-up waits for its turn in the
	// review gate (a check waits --max-review-wait).
	followUpWait = time.Minute
	// followUpTries: a follow-up pushed out of the gate or whose wait ran
	// out goes back to the end of the queue this many times, then its
	// session is revoked (fail closed).
	followUpTries = 3
)

// FollowUp is a TokenReview owed for a session admitted without one.
type FollowUp struct {
	k       tokenreview.Key
	token   string // held only until the review is made; never logged
	exp     time.Time
	ver     *tokenverify.Verified
	assumed tokenreview.Answer // what the verified claims said
	binding revocation.Binding
	tries   int
}

// HoldsToken reports whether f still holds its token (until its review).
func (f *FollowUp) HoldsToken() bool { return f.token != "" }

// followUpIdentity is the identity a follow-up counts against in the
// queue's per-identity share.
func followUpIdentity(f *FollowUp) string { return f.ver.Identity() }

// Reviewer makes the follow-up's TokenReview (tokenreview.Reviewer).
type Reviewer interface {
	Cached(k tokenreview.Key) (tokenreview.Answer, bool)
	FetchWithin(ctx context.Context, k tokenreview.Key, token string, exp time.Time, ver *tokenverify.Verified, wait time.Duration) (tokenreview.Answer, error)
}

// AfterConfig is what the follow-ups need: the queue's bound, registry and
// clock, notify (a failed follow-up marks its binding's objects changed),
// the reviewer, refuses (true when a TokenReview answer does not accept
// the token for the audience: the rule of a check's own answer) and how
// many follow-ups run at a time (--max-inflight-reviews).
type AfterConfig struct {
	Max      int
	Reg      prometheus.Registerer
	Now      func() time.Time
	Notify   func(key string)
	Reviewer Reviewer
	Refuses  func(rv *tokenreview.Answer, token string) bool
	Inflight int
}

// After owes and makes the follow-up reviews of
// --on-review-throttled=review-after; the embedded queue holds them.
type After struct {
	*reviewafter.Queue[*FollowUp]
	reviewer Reviewer
	refuses  func(rv *tokenreview.Answer, token string) bool
	inflight int
}

// NewAfter builds the follow-ups of cfg.
func NewAfter(cfg AfterConfig) (*After, error) {
	q, err := reviewafter.New(cfg.Max, cfg.Reg, cfg.Now, followUpIdentity, func(b revocation.Binding) {
		for _, key := range revocationhub.BindingKeys(b) {
			cfg.Notify(key)
		}
	})
	if err != nil {
		return nil, err
	}
	return &After{Queue: q, reviewer: cfg.Reviewer, refuses: cfg.Refuses, inflight: cfg.Inflight}, nil
}

// Run makes the owed follow-up reviews, --max-inflight-reviews at a time
// (each still takes its turn in the review gate), until ctx is done.
func (a *After) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range a.inflight {
		wg.Go(func() {
			for {
				f, ok := a.Take(ctx)
				if !ok {
					return
				}
				a.FollowUp(ctx, f)
			}
		})
	}
	wg.Wait()
}

// FollowUp makes f's TokenReview (or finds a fresh answer of the same
// token in the cache) and revokes f's binding unless it agrees with what
// the verified claims said. Fail closed: no answer after every try is a
// revocation.
func (a *After) FollowUp(ctx context.Context, f *FollowUp) {
	rv, ok := a.reviewer.Cached(f.k)
	var err error
	if !ok {
		rctx, cancel := context.WithTimeout(ctx, followUpWait)
		rv, err = a.reviewer.FetchWithin(rctx, f.k, f.token, f.exp, f.ver, followUpWait)
		cancel()
	}
	if ctx.Err() != nil {
		return // shutting down: the streams end with the process
	}
	if errors.Is(err, tokenreview.ErrThrottled) && f.tries+1 < followUpTries {
		f.tries++
		a.Add(f, true)
		return
	}
	result := reviewafter.Confirmed
	switch {
	case err != nil:
		result = reviewafter.Error
	case a.refuses(&rv, f.token) || !sameIdentity(&rv, &f.assumed):
		result = reviewafter.Refused
	}
	f.token = ""
	a.Count(result)
	if result != reviewafter.Confirmed {
		a.Revoke(f.binding)
	}
}

// sameIdentity reports whether the TokenReview answer names the identity
// the verified claims named: the same ServiceAccount, and no field of the
// bound Pod or Node (or the ServiceAccount's UID) that differs where both
// name one (an API server before 1.30 names no node in the answer).
func sameIdentity(got, assumed *tokenreview.Answer) bool {
	eq := func(g, a string) bool { return a == "" || g == "" || g == a }
	return got.Username == assumed.Username && eq(got.UID, assumed.UID) &&
		eq(got.PodName, assumed.PodName) && eq(got.PodUID, assumed.PodUID) &&
		eq(got.NodeName, assumed.NodeName) && eq(got.NodeUID, assumed.NodeUID)
}

// Owe queues the follow-up of an admission made under review-after on
// the verified claims' review assumed; false when the queue is full (the
// admission becomes review_throttled).
func (a *After) Owe(k tokenreview.Key, token string, exp time.Time, ver *tokenverify.Verified, assumed *tokenreview.Answer, b revocation.Binding) bool {
	return a.Add(&FollowUp{k: k, token: token, exp: exp, ver: ver, assumed: *assumed, binding: b}, false)
}
