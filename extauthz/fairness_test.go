package extauthz

import (
	"context"
	"errors"
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
		release, err := g.enter(ctx) // the burst token
		must(t, err)
		release()
		start := time.Now()
		release, err = g.enter(ctx) // due in 100 ms: waits
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
		for range 3 {
			wg.Go(func() {
				release, err := g.enter(ctx)
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
		release, err := g.enter(ctx)
		must(t, err)
		release()
		done := make(chan error)
		go func() {
			release, err := g.enter(ctx) // due in 1 s
			if err == nil {
				release()
			}
			done <- err
		}()
		synctest.Wait() // the caller sleeps until its token is due
		if !g.slots.TryAcquire(1) {
			t.Fatal("the slot is held by a caller waiting for the rate limiter")
		}
		g.slots.Release(1)
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
		hold, err := g.enter(ctx)
		must(t, err)
		start := time.Now()
		_, err = g.enter(ctx)
		if !errors.Is(err, errThrottled) || time.Since(start) != 300*time.Millisecond {
			t.Errorf("enter = %v after %s, want throttled after the 300ms share", err, time.Since(start))
		}
		hold()
	})
}

// TestBurstOfNewTokensServedWithinRate: of many fresh tokens at once, the
// ones that fit the rate and the share are reviewed and allowed, the rest
// are throttled (none waits for nothing), and no slot starves.
func TestBurstOfNewTokensServedWithinRate(t *testing.T) {
	e := newEnvDirect(t, func(o *Options) {
		o.KubeAPIQPS, o.KubeAPIBurst, o.MaxReviewWait, o.CheckTimeout = 0.001, 5, 10*time.Millisecond, time.Minute
	})
	var wg sync.WaitGroup
	var allowed, throttled atomic.Int64
	for range 20 {
		tok := e.answer(func(string) (authnv1.TokenReviewStatus, error) { return podBound(), nil })
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
}
