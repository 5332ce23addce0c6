// Package reviewgate is the fair gate in front of TokenReview: a rate, a
// number of calls in flight and a bounded wait, handed out in turns by
// identity (docs/extauthz.md#review-gate).
package reviewgate

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/wirekube/relay-ws/internal/contract"
)

// Gate bounds the TokenReview calls of the process: a call needs a
// token of the rate limiter (--kube-api-qps, --kube-api-burst) and one of
// the in-flight slots (--max-inflight-reviews). Both are handed out
// together, by the gate, in fair order: the slot is taken only once the
// rate token is there, so it is held only while a TokenReview is on the
// wire, and no slot stays free while a caller waits and a rate token is
// due.
//
// Fairness is start-time fair queuing by identity (the verified claims' IdentityKey: a
// ServiceAccount and the Pod or Node its token is bound to), every
// identity of equal weight, as the API server's Priority and Fairness
// queues its flows: each waiting call carries a virtual start tag, the
// later of its identity's previous call's tag + 1 and the tag of the call
// served last; the gate serves the lowest tag (the earlier arrival on a
// tie). So an identity new to the gate is served next, ahead of every
// identity that already had calls served; identities with calls waiting
// take turns, one call each; and an identity alone may use every slot and
// the whole rate. How many identities compete changes only the size of a
// turn, never an identity's place in it.
//
// A caller waits at most maxWait (and never past its deadline). The queue
// holds no more calls than the rate can serve within the caller's wait; a
// caller that finds it full takes the place of the newest call of the
// identity furthest ahead (the highest tag, when higher than its own), and
// is otherwise refused at once: under a burst the callers that fit the
// rate wait, the rest are told review_throttled (503, retryable) in
// microseconds rather than after the check timeout. Safe for concurrent
// use.
type Gate struct {
	limiter *rate.Limiter
	maxWait time.Duration
	refused *prometheus.CounterVec // by cause; nil: not counted

	mu    sync.Mutex
	free  int                      // slots not in flight
	ids   map[string]*gateIdentity // identities waiting or in flight; no idle entries
	queue gateQueue                // waiting calls, lowest tag first
	vtime uint64                   // the tag of the call served last
	seq   uint64                   // arrivals, to order equal tags
	armed bool                     // a timer will dispatch when the next rate token is due
}

// gateIdentity is one identity in the gate.
type gateIdentity struct {
	key      string
	next     uint64 // the tag its next call gets, unless the gate's vtime is later
	waiting  int
	inflight int
}

// gateCall is a caller in the queue. state and cause are guarded by the
// gate's mu; ready is closed when state leaves callWaiting.
type gateCall struct {
	id    *gateIdentity
	tag   uint64
	seq   uint64
	index int // in the queue's heap; -1 once out of it
	ready chan struct{}
	state callState
	cause string // why it was refused, when callRefused
}

type callState int

const (
	callWaiting callState = iota
	callGranted
	callRefused
)

// ErrThrottled is every refusal of the gate: the caller answers
// review_throttled.
var ErrThrottled = errors.New("tokenreview: in-flight bound reached until the check timeout")

// Causes of a gate refusal, the cause label of
// wirekube_extauthz_review_gate_refusals_total.
const (
	gateRefusedRate      = "rate"       // the queued calls take all the rate within the caller's wait
	gateRefusedSlot      = "slot"       // the caller's wait ended with every slot in flight
	gateRefusedPushedOut = "pushed_out" // an identity behind in its turns took the place of this queued call
)

// New is a gate of qps and burst (--kube-api-qps, --kube-api-burst), slots
// calls in flight (--max-inflight-reviews) and a wait of at most maxWait
// (--max-review-wait); refused counts its refusals by cause (nil: not
// counted; NewRefusals makes one).
func New(qps float64, burst, slots int, maxWait time.Duration, refused *prometheus.CounterVec) *Gate {
	return &Gate{
		refused: refused,
		limiter: rate.NewLimiter(rate.Limit(qps), burst),
		maxWait: maxWait,
		free:    slots,
		ids:     map[string]*gateIdentity{},
	}
}

// Enter waits for a rate token and a slot in the fair turn of identity
// who. On success the caller must call release once its TokenReview
// returned.
func (g *Gate) Enter(ctx context.Context, who string) (release func(), err error) {
	return g.EnterWithin(ctx, who, g.maxWait)
}

// enterWithin is enter with a wait of at most maxWait instead of the
// gate's (a follow-up review waits longer than a check).
func (g *Gate) EnterWithin(ctx context.Context, who string, maxWait time.Duration) (release func(), err error) {
	now := time.Now()
	budget := maxWait
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, dl.Sub(now))
	}
	g.mu.Lock()
	c, cause := g.queueLocked(who, now, budget)
	g.mu.Unlock()
	if cause != "" {
		return nil, g.refuse(cause)
	}
	return g.await(ctx, c, budget)
}

// queueLocked queues a call of who, pushing out another identity's call
// when the queue is full, and dispatches.
func (g *Gate) queueLocked(who string, now time.Time, budget time.Duration) (*gateCall, string) {
	id := g.ids[who]
	if id == nil {
		id = &gateIdentity{key: who}
	}
	c := &gateCall{id: id, tag: max(id.next, g.vtime), seq: g.seq, ready: make(chan struct{})}
	if len(g.queue) >= g.roomLocked(now, budget) {
		last := g.queue.furthest()
		if last == nil || !last.after(c) {
			return nil, gateRefusedRate
		}
		g.leaveQueueLocked(last, callRefused, gateRefusedPushedOut)
	}
	g.seq++
	g.ids[who] = id
	id.next = c.tag + 1
	id.waiting++
	heap.Push(&g.queue, c)
	g.dispatchLocked(now)
	return c, ""
}

// roomLocked is how many calls may wait: the rate tokens there are now and
// that come within budget (the slots are not counted: their calls' length
// is the API's business).
func (g *Gate) roomLocked(now time.Time, budget time.Duration) int {
	return int(g.limiter.TokensAt(now) + float64(g.limiter.Limit())*budget.Seconds())
}

// await waits until c is granted or refused, or its wait ends.
func (g *Gate) await(ctx context.Context, c *gateCall, budget time.Duration) (func(), error) {
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case <-c.ready:
	case <-t.C:
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch c.state {
	case callGranted:
		return func() { g.done(c.id) }, nil
	case callWaiting:
		// The wait ended first. With a slot free it was the rate that kept
		// the call waiting.
		cause := gateRefusedSlot
		if g.free > 0 {
			cause = gateRefusedRate
		}
		g.leaveQueueLocked(c, callRefused, cause)
	}
	return nil, g.refuse(c.cause)
}

// dispatchLocked hands free slots to the queue's lowest tags while rate
// tokens are there; when a slot is free but the next token is not, it arms
// a timer for the token.
func (g *Gate) dispatchLocked(now time.Time) {
	for g.free > 0 && len(g.queue) > 0 {
		if !g.limiter.AllowN(now, 1) {
			g.armLocked(now)
			return
		}
		c := g.queue[0]
		g.vtime = c.tag
		g.free--
		c.id.inflight++
		g.leaveQueueLocked(c, callGranted, "")
	}
}

// armLocked dispatches again once the next rate token is due. One timer at
// a time; it runs dispatch, which arms the next one if still needed.
func (g *Gate) armLocked(now time.Time) {
	if g.armed {
		return
	}
	g.armed = true
	r := g.limiter.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	// The delay is rounded down: at worst the timer comes a nanosecond early
	// and is armed once more.
	time.AfterFunc(max(wait, time.Nanosecond), func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.armed = false
		g.dispatchLocked(time.Now())
	})
}

// leaveQueueLocked takes c out of the queue with its outcome and wakes it.
func (g *Gate) leaveQueueLocked(c *gateCall, state callState, cause string) {
	heap.Remove(&g.queue, c.index)
	c.id.waiting--
	if c.id.next == c.tag+1 && state == callRefused {
		c.id.next = c.tag // its newest call left unserved: the tag is free again
	}
	c.state, c.cause = state, cause
	close(c.ready)
	g.forgetIdleLocked(c.id)
}

// done returns the slot of a granted call and hands it on.
func (g *Gate) done(id *gateIdentity) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.free++
	id.inflight--
	g.forgetIdleLocked(id)
	g.dispatchLocked(time.Now())
}

// forgetIdleLocked drops an identity with nothing waiting or in flight: it
// is new to the gate when it comes back (its tag is then the gate's
// vtime). The map stays bounded by the queue and the slots.
func (g *Gate) forgetIdleLocked(id *gateIdentity) {
	if id.waiting == 0 && id.inflight == 0 {
		delete(g.ids, id.key)
	}
}

func (g *Gate) refuse(cause string) error {
	if g.refused != nil {
		g.refused.WithLabelValues(cause).Inc()
	}
	return ErrThrottled
}

// after reports whether c is served after o: a higher tag, or the same tag
// and a later arrival.
func (c *gateCall) after(o *gateCall) bool {
	return c.tag > o.tag || (c.tag == o.tag && c.seq > o.seq)
}

// gateQueue is a min-heap of waiting calls by (tag, arrival).
type gateQueue []*gateCall

func (q gateQueue) Len() int           { return len(q) }
func (q gateQueue) Less(i, j int) bool { return q[j].after(q[i]) }
func (q gateQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}

func (q *gateQueue) Push(x any) {
	c := x.(*gateCall)
	c.index = len(*q)
	*q = append(*q, c)
}

func (q *gateQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	old[len(old)-1] = nil
	c.index = -1
	*q = old[:len(old)-1]
	return c
}

// furthest is the call served last of the queue (nil when empty): a leaf
// of the heap, found by a scan of the bounded queue.
func (q gateQueue) furthest() *gateCall {
	var last *gateCall
	for _, c := range q {
		if last == nil || c.after(last) {
			last = c
		}
	}
	return last
}

// MaxWait is the longest a caller waits (--max-review-wait).
func (g *Gate) MaxWait() time.Duration { return g.maxWait }

// SetRate changes the rate (calls a second); calls already queued are
// dispatched at the new rate from the next token on.
func (g *Gate) SetRate(qps float64) { g.limiter.SetLimit(rate.Limit(qps)) }

// NewRefusals is the counter of the gate's refusals by cause
// (wirekube_extauthz_review_gate_refusals_total), every cause at 0.
func NewRefusals() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: contract.MetricsNamespaceExtauthz, Name: "review_gate_refusals_total",
		Help: "TokenReviews not made, answered review_throttled, by cause (rate|slot|pushed_out).",
	}, []string{"cause"})
	for _, cause := range []string{gateRefusedRate, gateRefusedSlot, gateRefusedPushedOut} {
		c.WithLabelValues(cause)
	}
	return c
}

// Counts is what the gate holds now: free in-flight slots, identities
// waiting or in flight, calls queued.
func (g *Gate) Counts() (free, identities, queued int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.free, len(g.ids), len(g.queue)
}
