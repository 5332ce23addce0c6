package extauthz

import (
	"context"
	"errors"
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenreview"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/extauthz/internal/reviewafter"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenverify"
	"github.com/wirekube/relay-ws/internal/contract"
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

// followUp is a TokenReview owed for a session admitted without one.
type followUp struct {
	k       tokenreview.Key
	token   string // held only until the review is made; never logged
	exp     time.Time
	ver     *tokenverify.Verified
	assumed tokenreview.Answer // what the verified claims said
	binding revocation.Binding
	tries   int
}

// followUpIdentity is the identity a follow-up counts against in the
// queue's per-identity share.
func followUpIdentity(f *followUp) string { return f.ver.Identity() }

// newFollowUps builds the queue of --on-review-throttled=review-after; a
// failed follow-up marks its binding's objects changed on notify.
func newFollowUps(max int, reg prometheus.Registerer, now func() time.Time, notify func(key string)) (*reviewafter.Queue[*followUp], error) {
	return reviewafter.New(max, reg, now, followUpIdentity, func(b revocation.Binding) {
		for _, key := range revocationhub.BindingKeys(b) {
			notify(key)
		}
	})
}

// RunReviewAfter makes the owed follow-up reviews, --max-inflight-reviews
// at a time (each still takes its turn in the review gate), until ctx is
// done. It returns at once under --on-review-throttled=deny.
func (a *Authorizer) RunReviewAfter(ctx context.Context) error {
	if a.after == nil {
		return nil
	}
	var wg sync.WaitGroup
	for range a.cfg.maxInflight {
		wg.Go(func() {
			for {
				f, ok := a.after.Take(ctx)
				if !ok {
					return
				}
				a.followUp(ctx, f)
			}
		})
	}
	wg.Wait()
	return nil
}

// followUp makes f's TokenReview (or finds a fresh answer of the same
// token in the cache) and revokes f's binding unless it agrees with what
// the verified claims said. Fail closed: no answer after every try is a
// revocation.
func (a *Authorizer) followUp(ctx context.Context, f *followUp) {
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
		a.after.Add(f, true)
		return
	}
	result := reviewafter.Confirmed
	switch {
	case err != nil:
		result = reviewafter.Error
	case checkReview(&rv, f.token, a.cfg.audience) != "" || !sameIdentity(&rv, &f.assumed):
		result = reviewafter.Refused
	}
	f.token = ""
	a.after.Count(result)
	if result != reviewafter.Confirmed {
		a.after.Revoke(f.binding)
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

// reviewThrottledAfter is the review-after fallback of a review_throttled
// answer on the relay path: the review the verified claims stand for, when
// the mode is on and the claims can be bound locally. Otherwise the reason
// stands.
func (a *Authorizer) reviewThrottledAfter(c *tokenverify.Claims, kind pathKind, reason contract.Reason) (tokenreview.Answer, bool, contract.Reason) {
	if a.after == nil || reason != contract.ReasonReviewThrottled || kind != pathRelay {
		return tokenreview.Answer{}, false, reason
	}
	rv, ok := offlineReview(c, a.cfg.audience)
	if !ok {
		return tokenreview.Answer{}, false, reason
	}
	return rv, true, ""
}

// oweReview queues the follow-up of an allow d made under review-after;
// when the queue is full the allow becomes review_throttled.
func (a *Authorizer) oweReview(d Decision, k tokenreview.Key, token string, exp time.Time, ver *tokenverify.Verified, rv *tokenreview.Answer) Decision {
	if !d.Allowed() {
		return d
	}
	if !a.after.Add(&followUp{k: k, token: token, exp: exp, ver: ver, assumed: *rv, binding: d.binding}, false) {
		return deny(contract.ReasonReviewThrottled)
	}
	return d
}
