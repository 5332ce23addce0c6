package extauthz

import (
	"context"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
)

// reviewGate bounds the TokenReview calls of the process: first a token of
// the rate limiter (--kube-api-qps, --kube-api-burst), then one of the
// in-flight slots (--max-inflight-reviews). The slot is taken only once the
// rate token is due, so it is held only while a TokenReview is on the wire.
//
// A caller waits at most maxWait (and never past its deadline) for both. A
// caller whose rate token would come later than that is refused at once
// rather than queueing: under a burst of new tokens the callers that fit in
// the rate are served and the rest are told review_throttled (503,
// retryable) in microseconds, instead of everyone waiting out the check
// timeout and nobody being served. Safe for concurrent use.
type reviewGate struct {
	limiter *rate.Limiter
	slots   *semaphore.Weighted
	maxWait time.Duration
}

func newReviewGate(qps float64, burst, slots int, maxWait time.Duration) *reviewGate {
	return &reviewGate{
		limiter: rate.NewLimiter(rate.Limit(qps), burst),
		slots:   semaphore.NewWeighted(int64(slots)),
		maxWait: maxWait,
	}
}

// enter waits for a rate token and a slot, within the caller's share. On
// success the caller must call release once its TokenReview returned.
func (g *reviewGate) enter(ctx context.Context) (release func(), err error) {
	now := time.Now()
	budget := g.maxWait
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, dl.Sub(now))
	}
	res := g.limiter.ReserveN(now, 1)
	if !res.OK() {
		return nil, errThrottled
	}
	delay := res.DelayFrom(now)
	if delay > budget {
		res.CancelAt(now) // give the token back to the next caller
		return nil, errThrottled
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			res.Cancel()
			return nil, errThrottled
		}
	}
	sctx, cancel := context.WithTimeout(ctx, budget-delay)
	defer cancel()
	if err := g.slots.Acquire(sctx, 1); err != nil {
		return nil, errThrottled
	}
	return func() { g.slots.Release(1) }, nil
}
