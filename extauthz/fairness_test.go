package extauthz

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	authnv1 "k8s.io/api/authentication/v1"

	"github.com/wirekube/relay-ws/internal/contract"
)

// TestReviewGateShare: a caller whose rate token is due later than its
// share is refused at once and gives the token back; one within its share
// waits for it.
func TestReviewGateShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newReviewGate(10, 1, 4, 250*time.Millisecond) // one token per 100 ms
		ctx := context.Background()
		release, err := g.enter(ctx, "a") // the burst token
		must(t, err)
		release()
		start := time.Now()
		release, err = g.enter(ctx, "b") // due in 100 ms: waits
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
				release, err := g.enter(ctx, fmt.Sprint(i)) // one identity each
				if errors.Is(err, errThrottled) {
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
		g := newReviewGate(1, 1, 1, 2*time.Second)
		ctx := context.Background()
		release, err := g.enter(ctx, "a")
		must(t, err)
		release()
		done := make(chan error)
		go func() {
			release, err := g.enter(ctx, "b") // due in 1 s
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
		g := newReviewGate(1000, 1000, 1, 300*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hold, err := g.enter(ctx, "a")
		must(t, err)
		start := time.Now()
		_, err = g.enter(ctx, "b")
		if !errors.Is(err, errThrottled) || time.Since(start) != 300*time.Millisecond {
			t.Errorf("enter = %v after %s, want throttled after the 300ms share", err, time.Since(start))
		}
		hold()
	})
}

// TestBurstOfNewTokensServedWithinRate: of many fresh tokens at once, the
// ones that fit the rate and the share are reviewed and allowed, the rest
// are throttled (none waits for nothing), and afterwards every in-flight
// slot is free again and no identity is still counted in the gate.
func TestBurstOfNewTokensServedWithinRate(t *testing.T) {
	e := newEnvDirect(t, func(o *Options) {
		o.KubeAPIQPS, o.KubeAPIBurst, o.MaxReviewWait, o.CheckTimeout = 0.001, 5, 10*time.Millisecond, time.Minute
	})
	var wg sync.WaitGroup
	var allowed, throttled atomic.Int64
	for i := range 20 {
		tok := e.answerAgent(i, func(string) (authnv1.TokenReviewStatus, error) { return podBound(), nil })
		wg.Go(func() {
			switch d := e.check(t, tok); d.Reason {
			case "":
				allowed.Add(1)
			case contract.ReasonReviewThrottled:
				throttled.Add(1)
			default:
				t.Errorf("reason %s", d.Reason)
			}
		})
	}
	wg.Wait()
	// 5 burst tokens; the next is due in 1,000 s, far past the 10 ms share.
	if allowed.Load() != 5 || throttled.Load() != 15 || e.reviews.Load() != 5 {
		t.Errorf("allowed %d, throttled %d, reviews %d; want 5, 15, 5", allowed.Load(), throttled.Load(), e.reviews.Load())
	}
	g := e.authz.reviewer.gate
	if free := g.freeSlots(); free != 16 { // Options.MaxInflightReviews' default
		t.Errorf("%d in-flight slots free after every check answered, want 16", free)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.ids) != 0 || len(g.queue) != 0 {
		t.Errorf("left in the gate after every check answered: %d identities, %d queued", len(g.ids), len(g.queue))
	}
}

// freeSlots is the gate's count of slots not in flight.
func (g *reviewGate) freeSlots() int {
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
				g := newReviewGate(1e6, 1e6, slots, time.Minute) // slots alone bound the calls
				start := time.Now()
				var mu sync.Mutex
				ended := map[time.Duration]int{}
				var wg sync.WaitGroup
				for i := range slots * waves {
					wg.Go(func() {
						release, err := g.enter(context.Background(), fmt.Sprint("agent-", i%ids))
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
