// Package reviewafter is the queue of follow-up TokenReviews of
// --on-review-throttled=review-after: the relay upgrades admitted on their
// verified claims while the review gate was full, each owing a TokenReview
// made afterwards, and the bindings whose follow-up failed. It knows
// nothing of tokens or reviews: extauthz makes the review and reports the
// result here.
package reviewafter

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
)

// Share bounds the follow-ups of one identity (a ServiceAccount and the Pod
// or Node its token is bound to) waiting in the queue. An agent owes one
// per token and reconnect within a follow-up's wait; one that upgrades in a
// loop while the gate is full would otherwise fill the queue and leave
// every other agent review_throttled.
const Share = 4

// DistrustFor is how long a binding whose follow-up failed stays revoked:
// new sessions of it in that time are revoked when the bridge reports them
// (the token's own next check meets the negative cache and a TokenReview of
// its own).
const DistrustFor = time.Minute

// Results of a follow-up review, the result label of
// wirekube_extauthz_review_after_total.
const (
	Admitted  = "admitted"   // a throttled relay upgrade admitted, its review owed
	QueueFull = "queue_full" // --review-after-max-pending reached: answered review_throttled
	// IdentityShare: the token's identity already has Share follow-ups
	// waiting: answered review_throttled.
	IdentityShare = "identity_share"
	Confirmed     = "confirmed" // the TokenReview agreed
	Refused       = "refused"   // the TokenReview refused the token or named another identity: revoked
	Error         = "error"     // no TokenReview answer after every try: revoked
)

// Queue holds follow-ups of type T (FIFO, bounded, at most Share waiting
// per identity) and the bindings whose follow-up failed. Safe for
// concurrent use.
type Queue[T any] struct {
	max      int
	results  *prometheus.CounterVec
	now      func() time.Time
	identity func(T) string
	// onRevoke makes every revocation stream re-judge the bindings of b's
	// objects (extauthz marks them changed on its LiveBindings).
	onRevoke func(b revocation.Binding)

	mu       sync.Mutex
	queue    []T
	waiting  map[string]int // follow-ups in the queue per identity
	wake     chan struct{}  // one pending wake-up
	distrust map[string]time.Time
}

// New returns a queue of at most max follow-ups, each of the identity
// identity names; its metrics go to reg.
func New[T any](max int, reg prometheus.Registerer, now func() time.Time, identity func(T) string,
	onRevoke func(b revocation.Binding)) (*Queue[T], error) {
	q := &Queue[T]{max: max, now: now, identity: identity, onRevoke: onRevoke, wake: make(chan struct{}, 1),
		distrust: map[string]time.Time{}, waiting: map[string]int{}}
	q.results = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: contract.MetricsNamespaceExtauthz, Name: "review_after_total",
		Help: "Relay upgrades admitted under --on-review-throttled=review-after and their follow-up TokenReviews, " +
			"by result (admitted|queue_full|identity_share|confirmed|refused|error).",
	}, []string{"result"})
	for _, r := range []string{Admitted, QueueFull, IdentityShare, Confirmed, Refused, Error} {
		q.results.WithLabelValues(r)
	}
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: contract.MetricsNamespaceExtauthz, Name: "review_after_pending",
		Help: "Follow-up TokenReviews waiting (bounded by --review-after-max-pending).",
	}, func() float64 { return float64(q.Len()) })
	limit := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: contract.MetricsNamespaceExtauthz, Name: "review_after_pending_limit",
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

// Len is how many follow-ups wait.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// Count adds one to review_after_total{result}.
func (q *Queue[T]) Count(result string) { q.results.WithLabelValues(result).Inc() }

// Results is review_after_total, for tests of the callers.
func (q *Queue[T]) Results() *prometheus.CounterVec { return q.results }

// Add queues f unless the queue is full or f's identity has its share
// waiting (a retry, always).
func (q *Queue[T]) Add(f T, retry bool) bool {
	who := q.identity(f)
	q.mu.Lock()
	if !retry {
		refused := ""
		switch {
		case q.waiting[who] >= Share:
			refused = IdentityShare
		case len(q.queue) >= q.max:
			refused = QueueFull
		}
		if refused != "" {
			q.mu.Unlock()
			q.Count(refused)
			return false
		}
	}
	q.queue = append(q.queue, f)
	q.waiting[who]++
	q.mu.Unlock()
	if !retry {
		q.Count(Admitted)
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// Take returns the oldest follow-up, waiting for one until ctx is done.
func (q *Queue[T]) Take(ctx context.Context) (T, bool) {
	for {
		q.mu.Lock()
		if len(q.queue) > 0 {
			f := q.queue[0]
			var zero T
			q.queue[0] = zero
			q.queue = q.queue[1:]
			if who := q.identity(f); q.waiting[who] <= 1 {
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
			var zero T
			return zero, false
		}
	}
}

// distrustKey names a binding's identity: its ServiceAccount and the Pod
// or Node the token was bound to.
func distrustKey(b revocation.Binding) string {
	return b.Identity + "\x00" + b.PodUID + "\x00" + b.NodeUID
}

// Revoke records b as distrusted for DistrustFor and makes every stream
// re-judge the bindings of its objects (the re-judgement then revokes them).
func (q *Queue[T]) Revoke(b revocation.Binding) {
	now := q.now()
	q.mu.Lock()
	for k, until := range q.distrust {
		if !now.Before(until) {
			delete(q.distrust, k)
		}
	}
	q.distrust[distrustKey(b)] = now.Add(DistrustFor)
	q.mu.Unlock()
	q.onRevoke(b)
}

// Distrusted reports whether b's follow-up review failed within
// DistrustFor.
func (q *Queue[T]) Distrusted(b revocation.Binding) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	until, ok := q.distrust[distrustKey(b)]
	return ok && q.now().Before(until)
}
