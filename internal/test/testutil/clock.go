package testutil

import (
	"sync"
	"time"
)

// Clock is a settable clock for code that takes a `now func() time.Time`.
// Safe for concurrent use. Prefer a testing/synctest bubble, where the time
// package itself is fake; use Clock where a test needs a fixed calendar date
// (an expiry header it compares) or runs subtests, which a bubble forbids.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock that reads start until advanced.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
