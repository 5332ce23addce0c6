package identitysig

import (
	"errors"
	"sync"
	"time"
)

// ErrReplayed and ErrCacheFull are ReplayCache.Add's refusals.
var (
	ErrReplayed  = errors.New("identitysig: nonce already used")
	ErrCacheFull = errors.New("identitysig: replay cache full")
)

// ReplayCache remembers the nonces of accepted signatures until their
// signature would be stale anyway, at most max of them. Safe for concurrent
// use. Only signatures that verified reach it, so filling it takes as many
// extauthz allows as it holds entries.
type ReplayCache struct {
	mu      sync.Mutex
	max     int
	seen    map[[NonceLen]byte]struct{}
	queue   []replayEntry // in insertion order; expiries never decrease
	head    int           // queue[head:] is live
	lastExp int64
}

type replayEntry struct {
	nonce [NonceLen]byte
	exp   int64 // Unix nanoseconds
}

// NewReplayCache returns a cache of at most max nonces.
func NewReplayCache(max int) *ReplayCache {
	return &ReplayCache{max: max, seen: make(map[[NonceLen]byte]struct{})}
}

// Add records nonce until until. It returns ErrReplayed for a nonce it
// holds, ErrCacheFull when it holds max nonces none of which expired by now.
// An entry is kept at least as long as the one before it (the queue's
// expiries never decrease, so expired entries are always at its head):
// keeping a nonce longer than needed is safe, forgetting it early is not.
func (c *ReplayCache) Add(nonce [NonceLen]byte, until, now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now.UnixNano())
	if _, ok := c.seen[nonce]; ok {
		return ErrReplayed
	}
	if len(c.seen) >= c.max {
		return ErrCacheFull
	}
	exp := max(until.UnixNano(), c.lastExp)
	c.lastExp = exp
	c.seen[nonce] = struct{}{}
	c.queue = append(c.queue, replayEntry{nonce, exp})
	return nil
}

// Len is the number of nonces held (for the metric).
func (c *ReplayCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// expire drops the entries expired before now (one expiring at now still
// holds: a signature exactly MaxAge old is accepted) and compacts the queue once its
// dead head is over half of it.
func (c *ReplayCache) expire(now int64) {
	for c.head < len(c.queue) && c.queue[c.head].exp < now {
		delete(c.seen, c.queue[c.head].nonce)
		c.head++
	}
	if c.head > 0 && c.head >= len(c.queue)/2 {
		n := copy(c.queue, c.queue[c.head:])
		clear(c.queue[n:])
		c.queue, c.head = c.queue[:n], 0
	}
}
