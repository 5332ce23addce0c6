package extauthz

import (
	"context"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
)

// reviewGate bounds the TokenReview calls of the process: first the caller's
// identity share, then a token of the rate limiter (--kube-api-qps,
// --kube-api-burst), then one of the in-flight slots
// (--max-inflight-reviews). The slot is taken only once the rate token is
// due, so it is held only while a TokenReview is on the wire.
//
// A caller waits at most maxWait (and never past its deadline) for both. A
// caller whose rate token would come later than that is refused at once
// rather than queueing: under a burst of new tokens the callers that fit in
// the rate are served and the rest are told review_throttled (503,
// retryable) in microseconds, instead of everyone waiting out the check
// timeout and nobody being served.
//
// Fairness: one identity (identityKey: a ServiceAccount and the Pod or Node
// its token is bound to) holds at most share calls of the gate at once,
// waiting for a rate token or a slot or in flight, and passes it at most at
// a quarter of the rate (a bucket of its own, a quarter of the burst); a
// call beyond either is refused at once. Rate tokens are handed out in the
// order they are asked for, so an identity flooding the gate with distinct
// tokens gets at most share of the calls queued at any time and a quarter
// of the rate, and every other identity keeps its place. An agent needs one
// review per token, far inside both. Safe for concurrent use.
type reviewGate struct {
	limiter *rate.Limiter
	slots   *semaphore.Weighted
	maxWait time.Duration
	share   int
	refused *prometheus.CounterVec // by cause; nil: not counted

	mu    sync.Mutex
	held  map[string]int // calls per identity in the gate; no zero entries
	rates *lru.Cache[string, *rate.Limiter]
	// idQPS and idBurst are one identity's bucket.
	idQPS   rate.Limit
	idBurst int
}

// identityBuckets bounds the per-identity rate buckets kept. An evicted
// identity starts again with a full bucket of its own; the shared rate
// limiter still bounds it, and evicting one takes this many other
// identities asking in between.
const identityBuckets = 8192

// Causes of a gate refusal, the cause label of
// wirekube_extauthz_review_gate_refusals_total.
const (
	gateRefusedShare  = "identity_share" // the identity already holds its share
	gateRefusedIDRate = "identity_rate"  // the identity used its share of the rate
	gateRefusedRate   = "rate"           // the rate token is due after the caller's wait
	gateRefusedSlot   = "slot"           // no slot freed within the caller's wait
)

// identityShare is the part of the in-flight slots one identity may hold:
// a quarter, at least one. Sixteen slots (the default) give four.
func identityShare(slots int) int { return max(1, slots/4) }

func newReviewGate(qps float64, burst, slots int, maxWait time.Duration) *reviewGate {
	rates, _ := lru.New[string, *rate.Limiter](identityBuckets) // errors only on a size < 1
	return &reviewGate{
		limiter: rate.NewLimiter(rate.Limit(qps), burst),
		slots:   semaphore.NewWeighted(int64(slots)),
		maxWait: maxWait,
		share:   identityShare(slots),
		held:    map[string]int{},
		rates:   rates,
		idQPS:   rate.Limit(qps / 4),
		idBurst: max(1, burst/4),
	}
}

// enter waits for a rate token and a slot, within the caller's share and
// the share of its identity who. On success the caller must call release
// once its TokenReview returned.
func (g *reviewGate) enter(ctx context.Context, who string) (release func(), err error) {
	if cause := g.hold(who); cause != "" {
		return nil, g.refuse(cause)
	}
	releaseSlot, cause := g.wait(ctx)
	if cause != "" {
		g.unhold(who)
		return nil, g.refuse(cause)
	}
	return func() { releaseSlot(); g.unhold(who) }, nil
}

func (g *reviewGate) wait(ctx context.Context) (release func(), cause string) {
	now := time.Now()
	budget := g.maxWait
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, dl.Sub(now))
	}
	res := g.limiter.ReserveN(now, 1)
	if !res.OK() {
		return nil, gateRefusedRate
	}
	delay := res.DelayFrom(now)
	if delay > budget {
		res.CancelAt(now) // give the token back to the next caller
		return nil, gateRefusedRate
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			res.Cancel()
			return nil, gateRefusedRate
		}
	}
	sctx, cancel := context.WithTimeout(ctx, budget-delay)
	defer cancel()
	if err := g.slots.Acquire(sctx, 1); err != nil {
		return nil, gateRefusedSlot
	}
	return func() { g.slots.Release(1) }, ""
}

// hold counts one more call of who, unless who already holds its share of
// the gate or used its share of the rate (the refusal's cause).
func (g *reviewGate) hold(who string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held[who] >= g.share {
		return gateRefusedShare
	}
	lim, ok := g.rates.Get(who)
	if !ok {
		lim = rate.NewLimiter(g.idQPS, g.idBurst)
		g.rates.Add(who, lim)
	}
	if !lim.Allow() {
		return gateRefusedIDRate
	}
	g.held[who]++
	return ""
}

func (g *reviewGate) unhold(who string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held[who]--; g.held[who] <= 0 {
		delete(g.held, who) // the map holds only identities in the gate
	}
}

func (g *reviewGate) refuse(cause string) error {
	if g.refused != nil {
		g.refused.WithLabelValues(cause).Inc()
	}
	return errThrottled
}
