package extauthz

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	// distrustFor is how long a binding whose follow-up failed stays
	// revoked: new sessions of it in that time are revoked when the
	// bridge reports them (the token's own next check meets the negative
	// cache and a TokenReview of its own).
	distrustFor = time.Minute
)

// Results of a follow-up review, the result label of
// wirekube_extauthz_review_after_total.
const (
	afterAdmitted  = "admitted"   // a throttled relay upgrade admitted, its review owed
	afterQueueFull = "queue_full" // --review-after-max-pending reached: answered review_throttled
	// afterIdentityShare: the token's identity already has
	// reviewAfterShare follow-ups waiting: answered review_throttled.
	afterIdentityShare = "identity_share"
	afterConfirmed     = "confirmed" // the TokenReview agreed
	afterRefused       = "refused"   // the TokenReview refused the token or named another identity: revoked
	afterError         = "error"     // no TokenReview answer after every try: revoked
)

// followUp is a TokenReview owed for a session admitted without one.
type followUp struct {
	k       cacheKey
	token   string // held only until the review is made; never logged
	exp     time.Time
	ver     *verified
	assumed review // what the verified claims said
	binding revocation.Binding
	tries   int
}

// reviewAfterShare bounds the follow-ups of one identity (identityKey: a
// ServiceAccount and the Pod or Node its token is bound to) waiting in the
// queue. An agent owes one per token and reconnect within a follow-up's
// wait; one that upgrades in a loop while the gate is full would otherwise
// fill the queue and leave every other agent review_throttled.
const reviewAfterShare = 4

// reviewAfter is the queue of follow-up reviews (FIFO, bounded, at most
// reviewAfterShare waiting per identity) and the bindings whose follow-up
// failed. Safe for concurrent use.
type reviewAfter struct {
	max     int
	results *prometheus.CounterVec
	now     func() time.Time
	// notify marks an object key changed on every revocation stream (the
	// LiveBindings' Notify), so the streams re-judge the bindings that name it.
	notify func(key string)

	mu       sync.Mutex
	queue    []*followUp
	waiting  map[string]int // follow-ups in the queue per identity
	wake     chan struct{}  // one pending wake-up
	distrust map[string]time.Time
}

func newReviewAfter(max int, reg prometheus.Registerer, now func() time.Time, notify func(key string)) (*reviewAfter, error) {
	q := &reviewAfter{max: max, now: now, wake: make(chan struct{}, 1), distrust: map[string]time.Time{},
		waiting: map[string]int{}, notify: notify}
	q.results = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "review_after_total",
		Help: "Relay upgrades admitted under --on-review-throttled=review-after and their follow-up TokenReviews, " +
			"by result (admitted|queue_full|identity_share|confirmed|refused|error).",
	}, []string{"result"})
	for _, r := range []string{afterAdmitted, afterQueueFull, afterIdentityShare, afterConfirmed, afterRefused, afterError} {
		q.results.WithLabelValues(r)
	}
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "review_after_pending",
		Help: "Follow-up TokenReviews waiting (bounded by --review-after-max-pending).",
	}, func() float64 { return float64(q.len()) })
	limit := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "review_after_pending_limit",
		Help: "The --review-after-max-pending bound.",
	})
	limit.Set(float64(max))
	for _, c := range []prometheus.Collector{q.results, pending, limit} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return q, nil
}

func (q *reviewAfter) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// add queues f unless the queue is full or f's identity has its share
// waiting (a retry, always).
func (q *reviewAfter) add(f *followUp, retry bool) bool {
	who := f.ver.identity()
	q.mu.Lock()
	if !retry {
		refused := ""
		switch {
		case q.waiting[who] >= reviewAfterShare:
			refused = afterIdentityShare
		case len(q.queue) >= q.max:
			refused = afterQueueFull
		}
		if refused != "" {
			q.mu.Unlock()
			q.results.WithLabelValues(refused).Inc()
			return false
		}
	}
	q.queue = append(q.queue, f)
	q.waiting[who]++
	q.mu.Unlock()
	if !retry {
		q.results.WithLabelValues(afterAdmitted).Inc()
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// take returns the oldest follow-up, waiting for one until ctx is done.
func (q *reviewAfter) take(ctx context.Context) (*followUp, bool) {
	for {
		q.mu.Lock()
		if len(q.queue) > 0 {
			f := q.queue[0]
			q.queue[0] = nil
			q.queue = q.queue[1:]
			if who := f.ver.identity(); q.waiting[who] <= 1 {
				delete(q.waiting, who)
			} else {
				q.waiting[who]--
			}
			more := len(q.queue) > 0
			q.mu.Unlock()
			if more { // pass the wake-up on to another worker
				select {
				case q.wake <- struct{}{}:
				default:
				}
			}
			return f, true
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// distrustKey names a binding's identity: its ServiceAccount and the Pod
// or Node the token was bound to.
func distrustKey(b revocation.Binding) string {
	return b.Identity + "\x00" + b.PodUID + "\x00" + b.NodeUID
}

// revoke records b as distrusted for distrustFor and makes every stream
// re-judge the bindings of its objects (rejudge then revokes them).
func (q *reviewAfter) revoke(b revocation.Binding) {
	now := q.now()
	q.mu.Lock()
	for k, until := range q.distrust {
		if !now.Before(until) {
			delete(q.distrust, k)
		}
	}
	q.distrust[distrustKey(b)] = now.Add(distrustFor)
	q.mu.Unlock()
	for _, key := range bindingKeys(b) {
		q.notify(key)
	}
}

// distrusted reports whether b's follow-up review failed within
// distrustFor.
func (q *reviewAfter) distrusted(b revocation.Binding) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	until, ok := q.distrust[distrustKey(b)]
	return ok && q.now().Before(until)
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
				f, ok := a.after.take(ctx)
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
	rv, ok := a.reviewer.cachedReview(f.k)
	var err error
	if !ok {
		rctx, cancel := context.WithTimeout(ctx, followUpWait)
		rv, err = a.reviewer.fetchWithin(rctx, f.k, f.token, f.exp, f.ver, followUpWait)
		cancel()
	}
	if ctx.Err() != nil {
		return // shutting down: the streams end with the process
	}
	if errors.Is(err, errThrottled) && f.tries+1 < followUpTries {
		f.tries++
		a.after.add(f, true)
		return
	}
	result := afterConfirmed
	switch {
	case err != nil:
		result = afterError
	case checkReview(&rv, f.token, a.cfg.audience) != "" || !sameIdentity(&rv, &f.assumed):
		result = afterRefused
	}
	f.token = ""
	a.after.results.WithLabelValues(result).Inc()
	if result != afterConfirmed {
		a.after.revoke(f.binding)
	}
}

// sameIdentity reports whether the TokenReview answer names the identity
// the verified claims named: the same ServiceAccount, and no field of the
// bound Pod or Node (or the ServiceAccount's UID) that differs where both
// name one (an API server before 1.30 names no node in the answer).
func sameIdentity(got, assumed *review) bool {
	eq := func(g, a string) bool { return a == "" || g == "" || g == a }
	return got.username == assumed.username && eq(got.uid, assumed.uid) &&
		eq(got.podName, assumed.podName) && eq(got.podUID, assumed.podUID) &&
		eq(got.nodeName, assumed.nodeName) && eq(got.nodeUID, assumed.nodeUID)
}

// reviewThrottledAfter is the review-after fallback of a review_throttled
// answer on the relay path: the review the verified claims stand for, when
// the mode is on and the claims can be bound locally. Otherwise the reason
// stands.
func (a *Authorizer) reviewThrottledAfter(c *tokenClaims, kind pathKind, reason contract.Reason) (review, bool, contract.Reason) {
	if a.after == nil || reason != contract.ReasonReviewThrottled || kind != pathRelay {
		return review{}, false, reason
	}
	rv, ok := c.offlineReview(a.cfg.audience)
	if !ok {
		return review{}, false, reason
	}
	return rv, true, ""
}

// oweReview queues the follow-up of an allow d made under review-after;
// when the queue is full the allow becomes review_throttled.
func (a *Authorizer) oweReview(d Decision, k cacheKey, token string, exp time.Time, ver *verified, rv *review) Decision {
	if !d.Allowed() {
		return d
	}
	if !a.after.add(&followUp{k: k, token: token, exp: exp, ver: ver, assumed: *rv, binding: d.binding}, false) {
		return deny(contract.ReasonReviewThrottled)
	}
	return d
}
