package reviewgate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

// TestReviewGateShare: a caller whose rate token is due later than its
// share is refused at once and gives the token back; one within its share
// waits for it.
func TestReviewGateShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(10, 1, 4, 250*time.Millisecond, nil) // one token per 100 ms
		ctx := context.Background()
		release, err := g.Enter(ctx, "a") // the burst token
		must(t, err)
		release()
		start := time.Now()
		release, err = g.Enter(ctx, "b") // due in 100 ms: waits
		must(t, err)
		release()
		if waited := time.Since(start); waited != 100*time.Millisecond {
			t.Errorf("waited %s for a token due in 100ms", waited)
		}
		// Three callers at once: due in 100, 200, 300 ms; the third is
		// past the 250 ms share.
		var wg sync.WaitGroup
		var throttled atomic.Int64
		var refusedAt atomic.Int64
		for i := range 3 {
			wg.Go(func() {
				release, err := g.Enter(ctx, fmt.Sprint(i)) // one identity each
				if errors.Is(err, ErrThrottled) {
					throttled.Add(1)
					refusedAt.Store(int64(time.Since(start)))
					return
				}
				must(t, err)
				release()
			})
		}
		wg.Wait()
		if throttled.Load() != 1 {
			t.Errorf("%d callers throttled, want 1", throttled.Load())
		}
		if got := time.Duration(refusedAt.Load()); got != 100*time.Millisecond {
			t.Errorf("refused after %s of fake time, want at once (100ms = when the callers started)", got-100*time.Millisecond)
		}
	})
}

// TestReviewGateSlotNotHeldWhileWaiting: while one caller waits for its
// rate token, the only slot stays free for a caller whose token is due.
func TestReviewGateSlotNotHeldWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(1, 1, 1, 2*time.Second, nil)
		ctx := context.Background()
		release, err := g.Enter(ctx, "a")
		must(t, err)
		release()
		done := make(chan error)
		go func() {
			release, err := g.Enter(ctx, "b") // due in 1 s
			if err == nil {
				release()
			}
			done <- err
		}()
		synctest.Wait() // the caller sleeps until its token is due
		if free := g.freeSlots(); free != 1 {
			t.Fatalf("%d slots free while a caller waits for the rate limiter, want 1", free)
		}
		must(t, <-done)
	})
}

// TestSlowSlotsThrottleQuickly: with every slot on a hung API, a new token
// is answered review_throttled after its share, not after the check
// timeout.
func TestSlowSlotsThrottleQuickly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(1000, 1000, 1, 300*time.Millisecond, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hold, err := g.Enter(ctx, "a")
		must(t, err)
		start := time.Now()
		_, err = g.Enter(ctx, "b")
		if !errors.Is(err, ErrThrottled) || time.Since(start) != 300*time.Millisecond {
			t.Errorf("enter = %v after %s, want throttled after the 300ms share", err, time.Since(start))
		}
		hold()
	})
}

// freeSlots is the gate's count of slots not in flight.
func (g *Gate) freeSlots() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.free
}

// TestReviewGateNoSlotIdleWhileCallersWait: a storm (a relay restart: one
// token per agent, or a few identities with many tokens) keeps every
// in-flight slot busy while callers wait. 5 x 16 callers holding a slot
// 20 ms each end in waves of 16 at 20, 40, 60, 80 and 100 ms of fake
// time: a slot handed on late or left idle shows as a wave that is short
// or late.
func TestReviewGateNoSlotIdleWhileCallersWait(t *testing.T) {
	const slots, waves, hold = 16, 5, 20 * time.Millisecond
	for _, ids := range []int{slots * waves, 4} {
		t.Run(fmt.Sprint(ids, " identities"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(1e6, 1e6, slots, time.Minute, nil) // slots alone bound the calls
				start := time.Now()
				var mu sync.Mutex
				ended := map[time.Duration]int{}
				var wg sync.WaitGroup
				for i := range slots * waves {
					wg.Go(func() {
						release, err := g.Enter(context.Background(), fmt.Sprint("agent-", i%ids))
						must(t, err)
						time.Sleep(hold) // the TokenReview call
						mu.Lock()
						ended[time.Since(start)]++
						mu.Unlock()
						release()
					})
				}
				wg.Wait()
				want := map[time.Duration]int{}
				for w := 1; w <= waves; w++ {
					want[time.Duration(w)*hold] = slots
				}
				if fmt.Sprint(ended) != fmt.Sprint(want) {
					t.Errorf("calls ended at (fake time: count) %v, want %v", ended, want)
				}
			})
		})
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
