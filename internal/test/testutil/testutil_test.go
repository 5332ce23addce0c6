package testutil

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// run calls f with a recorder on its own goroutine (Fatalf ends it).
func run(t *testing.T, f func(tb testing.TB)) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failed
}

func TestSyncBufferConcurrentUse(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := len(b.String()); got != 800 {
		t.Fatalf("%d bytes, want 800", got)
	}
}

func TestEventually(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		ready := false
		go func() {
			time.Sleep(3 * time.Second) // fake time in the bubble
			mu.Lock()
			ready = true
			mu.Unlock()
		}()
		start := time.Now()
		if failed := run(t, func(tb testing.TB) {
			Eventually(tb, "ready", func() bool { mu.Lock(); defer mu.Unlock(); return ready })
		}); len(failed) != 0 {
			t.Fatalf("failed: %v", failed)
		}
		if d := time.Since(start); d < 3*time.Second || d > 3*time.Second+pollInterval {
			t.Errorf("returned after %s, want 3s", d)
		}

		start = time.Now()
		failed := run(t, func(tb testing.TB) { EventuallyWithin(tb, time.Second, "never", func() bool { return false }) })
		if len(failed) != 1 || !strings.Contains(failed[0], "waiting for never") {
			t.Fatalf("failures %q, want one naming the condition", failed)
		}
		if d := time.Since(start); d < time.Second {
			t.Errorf("gave up after %s, before its bound", d)
		}
	})
}

func TestContains(t *testing.T) {
	if failed := run(t, func(tb testing.TB) { Contains(tb, "alpha beta", "alpha", "beta") }); len(failed) != 0 {
		t.Errorf("failed although both are present: %v", failed)
	}
	failed := run(t, func(tb testing.TB) { Contains(tb, "alpha beta", "alpha", "gamma", "delta") })
	if len(failed) != 1 || !strings.Contains(failed[0], `["gamma" "delta"]`) {
		t.Errorf("failures %q, want one naming gamma and delta", failed)
	}
}

func TestClock(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := NewClock(start)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { c.Advance(time.Second); _ = c.Now() })
	}
	wg.Wait()
	if got := c.Now().Sub(start); got != 10*time.Second {
		t.Fatalf("advanced %s, want 10s", got)
	}
}

func TestClosedAddrRefuses(t *testing.T) {
	if c, err := net.Dial("tcp", ClosedAddr(t)); err == nil {
		c.Close()
		t.Fatal("a dial to ClosedAddr connected")
	}
}
