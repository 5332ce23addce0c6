// Package failurelimit bounds the failed checks of one client address: a
// token bucket of failures per address, each starting full, the addresses
// tracked at once bounded (least recently seen forgotten). extauthz counts
// only failures on what the client itself sent and turns a failure that
// finds no token into source_rate_limited; this room knows no check.
package failurelimit

import (
	"container/list"
	"math"
	"sync"
	"time"
)

// Limiter is one token bucket of failures per client address, each
// starting full; a failure takes a token. Safe for concurrent use; nil
// limits nothing.
type Limiter struct {
	burst float64
	rate  float64 // tokens a second
	max   int
	mu    sync.Mutex
	lru   *list.List // of *bucket, most recently seen first
	by    map[string]*list.Element
}

type bucket struct {
	addr   string
	tokens float64
	at     time.Time
}

// New returns nil when the limit is off (SourceFailureBurst 0).
func New(o Options) *Limiter {
	if o.SourceFailureBurst == 0 {
		return nil
	}
	return &Limiter{burst: float64(o.SourceFailureBurst), rate: o.SourceFailureRate,
		max: o.SourceFailureAddresses, lru: list.New(), by: map[string]*list.Element{}}
}

// Take takes a token of addr's bucket, refilled continuously up to burst;
// with none it returns false and the seconds until one is there (>= 1).
func (f *Limiter) Take(addr string, now time.Time) (bool, int) {
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
func (f *Limiter) bucket(addr string, now time.Time) *bucket {
	if e, ok := f.by[addr]; ok {
		f.lru.MoveToFront(e)
		return e.Value.(*bucket)
	}
	b := &bucket{addr: addr, tokens: f.burst, at: now}
	f.by[addr] = f.lru.PushFront(b)
	for f.lru.Len() > f.max {
		last := f.lru.Back()
		delete(f.by, last.Value.(*bucket).addr)
		f.lru.Remove(last)
	}
	return b
}
