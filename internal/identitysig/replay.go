package identitysig

import (
	"errors"
	"math"
	"sync"
	"time"
)

// ErrReplayed, ErrShareFull and ErrCacheFull are ReplayCache.Spend's
// refusals.
var (
	ErrReplayed  = errors.New("identitysig: nonce already used")
	ErrShareFull = errors.New("identitysig: owner holds its share of the replay cache")
	ErrCacheFull = errors.New("identitysig: replay cache full")
)

// ReplayCache remembers the nonces of accepted signatures until their
// signature would be stale anyway, at most max of them and at most share
// of one owner (the bridge's owner is the WireKubePeer). Safe for
// concurrent use. Only signatures that verified reach it, and the bridge
// spends a nonce only on an upgrade it answers 101, so filling it takes
// max/share owners each with that many admitted upgrades.
type ReplayCache struct {
	mu      sync.Mutex
	max     int
	share   int
	seen    map[[NonceLen]byte]struct{}
	owners  map[string]int // live entries per owner
	queue   []replayEntry  // in insertion order; expiries never decrease
	head    int            // queue[head:] is live
	lastExp int64
}

type replayEntry struct {
	nonce [NonceLen]byte
	owner string
	exp   int64 // Unix nanoseconds
}

// NewReplayCache returns a cache of at most max nonces, with no bound per
// owner.
func NewReplayCache(max int) *ReplayCache { return NewSharedReplayCache(max, math.MaxInt) }

// NewSharedReplayCache returns a cache of at most max nonces, at most share
// of them held by one owner.
func NewSharedReplayCache(max, share int) *ReplayCache {
	return &ReplayCache{max: max, share: share, seen: make(map[[NonceLen]byte]struct{}), owners: make(map[string]int)}
}

// Add is Spend for one unnamed owner.
func (c *ReplayCache) Add(nonce [NonceLen]byte, until, now time.Time) error {
	return c.Spend(nonce, "", until, now)
}

// Seen reports whether nonce is held at now: the early check, before the
// request has earned an entry. Only Spend decides, atomically.
func (c *ReplayCache) Seen(nonce [NonceLen]byte, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now.UnixNano())
	_, ok := c.seen[nonce]
	return ok
}

// Spend records nonce for owner until until. It returns ErrReplayed for a
// nonce it holds (of two concurrent Spends of one nonce exactly one
// succeeds), ErrShareFull when owner holds share live nonces, ErrCacheFull
// when it holds max. An entry is kept at least as long as the one before it
// (the queue's expiries never decrease, so expired entries are always at
// its head): keeping a nonce longer than needed is safe, forgetting it
// early is not.
func (c *ReplayCache) Spend(nonce [NonceLen]byte, owner string, until, now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now.UnixNano())
	if _, ok := c.seen[nonce]; ok {
		return ErrReplayed
	}
	if c.owners[owner] >= c.share {
		return ErrShareFull
	}
	if len(c.seen) >= c.max {
		return ErrCacheFull
	}
	exp := max(until.UnixNano(), c.lastExp)
	c.lastExp = exp
	c.seen[nonce] = struct{}{}
	c.owners[owner]++
	c.queue = append(c.queue, replayEntry{nonce, owner, exp})
	return nil
}

// Len is the number of nonces held (for the metric).
func (c *ReplayCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// Held is the number of live nonces of owner.
func (c *ReplayCache) Held(owner string, now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now.UnixNano())
	return c.owners[owner]
}

// expire drops the entries expired before now (one expiring at now still
// holds: a signature exactly MaxAge old is accepted) and compacts the queue once its
// dead head is over half of it.
func (c *ReplayCache) expire(now int64) {
	for c.head < len(c.queue) && c.queue[c.head].exp < now {
		e := &c.queue[c.head]
		delete(c.seen, e.nonce)
		if c.owners[e.owner]--; c.owners[e.owner] <= 0 {
			delete(c.owners, e.owner)
		}
		c.head++
	}
	if c.head > 0 && c.head >= len(c.queue)/2 {
		n := copy(c.queue, c.queue[c.head:])
		clear(c.queue[n:])
		c.queue, c.head = c.queue[:n], 0
	}
}
