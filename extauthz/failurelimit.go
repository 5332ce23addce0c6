package extauthz

import (
	"container/list"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// failureLimiter is one token bucket of failures per client address, each
// starting full; a failure takes a token, and a failure that finds none is
// answered source_rate_limited. Safe for concurrent use; nil limits nothing.
type failureLimiter struct {
	burst float64
	rate  float64 // tokens a second
	max   int
	mu    sync.Mutex
	lru   *list.List // of *failureBucket, most recently seen first
	by    map[string]*list.Element
}

type failureBucket struct {
	addr   string
	tokens float64
	at     time.Time
}

// newFailureLimiter returns nil when the limit is off.
func newFailureLimiter(o FailureLimitOptions) *failureLimiter {
	if o.SourceFailureBurst == 0 {
		return nil
	}
	return &failureLimiter{burst: float64(o.SourceFailureBurst), rate: o.SourceFailureRate,
		max: o.SourceFailureAddresses, lru: list.New(), by: map[string]*list.Element{}}
}

// clientFailure reports whether d refuses what the client itself sent: a
// request or a credential no agent sends (400, 401). Every other answer (an
// allow, a valid token of an identity not allowed, an unavailable review)
// is never limited.
func clientFailure(d Decision) bool {
	s := d.Status()
	return s == http.StatusBadRequest || s == http.StatusUnauthorized
}

// limit returns d, or source_rate_limited with the whole seconds until the
// address has a token again when d is a client failure and client's bucket
// is empty. The original reason stays in the log line's detail.
func (f *failureLimiter) limit(client string, d Decision, now time.Time) Decision {
	if f == nil || !clientFailure(d) {
		return d
	}
	ok, wait := f.take(client, now)
	if ok {
		return d
	}
	return Decision{Reason: contract.ReasonSourceRateLimited, Detail: string(d.Reason), RetryAfter: wait}
}

// take takes a token of addr's bucket, refilled continuously up to burst;
// with none it returns false and the seconds until one is there (>= 1).
func (f *failureLimiter) take(addr string, now time.Time) (bool, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.bucket(addr, now)
	if el := now.Sub(b.at).Seconds(); el > 0 {
		b.tokens = math.Min(f.burst, b.tokens+el*f.rate)
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, max(1, int(math.Ceil((1-b.tokens)/f.rate)))
}

// bucket returns addr's bucket, marked most recently seen, creating a full
// one (and forgetting the least recently seen beyond max) if needed.
func (f *failureLimiter) bucket(addr string, now time.Time) *failureBucket {
	if e, ok := f.by[addr]; ok {
		f.lru.MoveToFront(e)
		return e.Value.(*failureBucket)
	}
	b := &failureBucket{addr: addr, tokens: f.burst, at: now}
	f.by[addr] = f.lru.PushFront(b)
	for f.lru.Len() > f.max {
		last := f.lru.Back()
		delete(f.by, last.Value.(*failureBucket).addr)
		f.lru.Remove(last)
	}
	return b
}

// retryAfter is a deny's Retry-After value: the seconds of a
// source_rate_limited answer, 1 for a retryable one (503), "" otherwise.
func retryAfter(d Decision) string {
	switch {
	case d.RetryAfter > 0:
		return strconv.Itoa(d.RetryAfter)
	case d.Reason.Retryable():
		return "1"
	}
	return ""
}
