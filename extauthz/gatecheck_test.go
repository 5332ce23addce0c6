package extauthz

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"

	"github.com/wirekube/relay-ws/internal/contract"
)

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
	free, ids, queued := e.authz.reviewer.Gate().Counts()
	if free != 16 { // Options.MaxInflightReviews' default
		t.Errorf("%d in-flight slots free after every check answered, want 16", free)
	}
	if ids != 0 || queued != 0 {
		t.Errorf("left in the gate after every check answered: %d identities, %d queued", ids, queued)
	}
}
