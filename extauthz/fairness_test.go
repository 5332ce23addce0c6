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
	if !g.slots.TryAcquire(16) { // Options.MaxInflightReviews' default
		t.Error("in-flight slots still held after every check answered")
	} else {
		g.slots.Release(16)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) != 0 {
		t.Errorf("identities left in the gate after every check answered: %v", g.held)
	}
}

// TestReviewGateIdentityShare: one identity holds at most its share of the
// gate (a quarter of the slots); its next call is refused at once, another
// identity still gets in, and a released call makes room again.
func TestReviewGateIdentityShare(t *testing.T) {
	g := newReviewGate(1000, 1000, 8, time.Second) // share 2
	ctx := context.Background()
	first, err := g.enter(ctx, "flood")
	must(t, err)
	second, err := g.enter(ctx, "flood")
	must(t, err)
	if _, err := g.enter(ctx, "flood"); !errors.Is(err, errThrottled) {
		t.Fatalf("third call of one identity: %v, want throttled", err)
	}
	other, err := g.enter(ctx, "agent")
	must(t, err)
	first()
	again, err := g.enter(ctx, "flood")
	must(t, err)
	for _, release := range []func(){second, other, again} {
		release()
	}
	if len(g.held) != 0 {
		t.Errorf("identities left in the gate after every release: %v", g.held)
	}
}

// TestReviewGateFloodLeavesRateToOthers: an identity floods the gate with
// concurrent calls, each holding its slot, before five other identities
// ask; the rate (a burst of 8, then 10/s, 1 s of wait) fits about 18. The flood gets
// its share and no more, and every other identity is served rather than
// queued behind it.
func TestReviewGateFloodLeavesRateToOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newReviewGate(10, 8, 8, time.Second) // share 2, a bucket of 2 per identity
		ctx := context.Background()
		var floodWG, othersWG sync.WaitGroup
		var flood, others atomic.Int64
		hold := make(chan struct{})
		for range 20 {
			floodWG.Go(func() {
				if release, err := g.enter(ctx, "flood"); err == nil {
					flood.Add(1)
					<-hold
					release()
				}
			})
		}
		synctest.Wait() // the flood's calls are in the gate or refused
		for i := range 5 {
			othersWG.Go(func() {
				if release, err := g.enter(ctx, fmt.Sprint("agent-", i)); err == nil {
					others.Add(1)
					release()
				}
			})
		}
		othersWG.Wait()
		close(hold)
		floodWG.Wait()
		if others.Load() != 5 || flood.Load() != 2 {
			t.Errorf("served: other identities %d of 5, the flooding identity %d (want 5 and its share, 2)", others.Load(), flood.Load())
		}
	})
}

// TestReviewGateIdentityRate: one identity passes the gate at most at a
// quarter of the rate, from a bucket of a quarter of the burst, even one
// call at a time; other identities are not charged for it.
func TestReviewGateIdentityRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newReviewGate(40, 8, 16, time.Second) // per identity: 10/s, a bucket of 2
		ctx := context.Background()
		enter := func(who string) error {
			release, err := g.enter(ctx, who)
			if err == nil {
				release()
			}
			return err
		}
		must(t, enter("flood"))
		must(t, enter("flood"))
		if err := enter("flood"); !errors.Is(err, errThrottled) {
			t.Fatalf("third call at once: %v, want throttled", err)
		}
		must(t, enter("agent"))
		time.Sleep(100 * time.Millisecond) // one token of the identity's 10/s
		must(t, enter("flood"))
		if err := enter("flood"); !errors.Is(err, errThrottled) {
			t.Fatalf("second call after one refill: %v, want throttled", err)
		}
	})
}

// TestReviewGateNoSlotIdleWhileCallersWait: a storm of distinct identities
// (a relay restart: one token per agent) keeps every in-flight slot busy
// while callers wait. 5 x 16 callers holding a slot 20 ms each end in
// waves of 16 at 20, 40, 60, 80 and 100 ms of fake time: a slot handed on
// late or left idle shows as a wave that is short or late.
func TestReviewGateNoSlotIdleWhileCallersWait(t *testing.T) {
	const slots, waves, hold = 16, 5, 20 * time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		g := newReviewGate(1e6, 1e6, slots, time.Minute) // slots alone bound the calls
		start := time.Now()
		var mu sync.Mutex
		ended := map[time.Duration]int{}
		var wg sync.WaitGroup
		for i := range slots * waves {
			wg.Go(func() {
				release, err := g.enter(context.Background(), fmt.Sprint("agent-", i))
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
}
