package reviewgate

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The review gate flood: identities flooding the gate with
// distinct valid tokens (compromised agents minting tokens for their own
// Pods) while fresh agents connect. Fake time (synctest), so the figures
// do not depend on the machine; the gate has the defaults
// (--kube-api-qps=50 --kube-api-burst=100 --max-inflight-reviews=16
// --max-review-wait=500ms) and a TokenReview takes reviewLatency.
const (
	gateFloodSenders = 8                     // closed-loop senders per flooding identity
	gateFloodPause   = 20 * time.Millisecond // a sender's pause after a refusal
	gateFloodAgents  = 200                   // fresh agents, all connecting at 1 s
	gateFloodRun     = 10 * time.Second
	reviewLatency    = 5 * time.Millisecond // a TokenReview on the wire, as the storm tests of extauthz fake it
)

// gateFloodResult is one run's figures.
type gateFloodResult struct {
	admitted    int           // fresh agents admitted by the end of the run
	p50, p99    time.Duration // their connect time (first try to admission)
	floodServed int64         // the flooders' calls that passed the gate
}

// TestReviewGateFloodFreshAgents: while 1, 4 and then 16 identities flood
// the gate, at least a quarter of a wave of fresh agents is admitted within
// the run (with the agent's own backoff after a refusal: 1, 2, 4 ... s).
// Each retry wave can only fill the queue (the rate within the wait, 25
// calls), so the whole wave cannot get in; the fixed per-identity quarter
// of the gate let 16 identities take it all (11 of 200 admitted). It prints
// the figures docs/extauthz.md#capacity quotes.
func TestReviewGateFloodFreshAgents(t *testing.T) {
	for _, flooders := range []int{1, 4, 16} {
		t.Run(fmt.Sprint(flooders, " identities"), func(t *testing.T) {
			var r gateFloodResult
			synctest.Test(t, func(t *testing.T) { r = runGateFlood(flooders) })
			t.Logf("%d identities flooding (%d senders each): fresh agents admitted %d/%d, connect p50 %s p99 %s; flood calls through the gate %d (%.0f/s of the 50/s)",
				flooders, gateFloodSenders, r.admitted, gateFloodAgents, r.p50, r.p99, r.floodServed,
				float64(r.floodServed)/gateFloodRun.Seconds())
			if r.admitted < gateFloodAgents/4 {
				t.Errorf("%d of %d fresh agents admitted while %d identities flood", r.admitted, gateFloodAgents, flooders)
			}
		})
	}
}

func runGateFlood(flooders int) gateFloodResult {
	g := New(50, 100, 16, 500*time.Millisecond, nil)
	ctx, cancel := context.WithTimeout(context.Background(), gateFloodRun)
	defer cancel()
	var r gateFloodResult
	var floodServed atomic.Int64
	var wg sync.WaitGroup
	for i := range flooders * gateFloodSenders {
		wg.Go(func() { floodSender(ctx, g, fmt.Sprint("flood-", i%flooders), &floodServed) })
	}
	time.Sleep(time.Second)
	var mu sync.Mutex
	var lat []time.Duration
	for i := range gateFloodAgents {
		wg.Go(func() {
			if d, ok := freshAgent(ctx, g, fmt.Sprint("agent-", i)); ok {
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.floodServed = floodServed.Load()
	r.admitted = len(lat)
	if len(lat) > 0 {
		slices.Sort(lat)
		r.p50, r.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return r
}

// floodSender enters the gate as who until ctx ends: a TokenReview of
// reviewLatency when let in, a pause after a refusal.
func floodSender(ctx context.Context, g *Gate, who string, served *atomic.Int64) {
	for ctx.Err() == nil {
		release, err := g.Enter(ctx, who)
		if err != nil {
			sleepCtx(ctx, gateFloodPause)
			continue
		}
		served.Add(1)
		time.Sleep(reviewLatency)
		release()
	}
}

// freshAgent enters the gate once per try, with the agent's backoff (1, 2,
// 4 ... 30 s) after a refusal; it reports its connect time when admitted.
func freshAgent(ctx context.Context, g *Gate, who string) (time.Duration, bool) {
	start := time.Now()
	wait := time.Second
	for ctx.Err() == nil {
		release, err := g.Enter(ctx, who)
		if err == nil {
			d := time.Since(start)
			time.Sleep(reviewLatency)
			release()
			return d, true
		}
		sleepCtx(ctx, wait)
		wait = min(2*wait, 30*time.Second)
	}
	return 0, false
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
