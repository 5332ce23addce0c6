package reviewgate

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestReviewGateHoldsAMovedWaveInFairOrder is the admission order of a
// replica's share of moved agents, in fake time: a rate of 10
// TokenReviews per second, a burst of 1, a wait of 2 s, slots to spare.
// The wave is identity a three times (three tokens of one identity, the
// first one's TokenReview still in flight), b1 to b18 each once, then c1
// to c19 each once, all at t=0; every TokenReview stays in flight to the
// end.
//
// What the gate promises, written out by hand: it holds what the rate
// serves within the wait (1 token now, taken by a, + 10/s x 2.05 s = 20
// waiting calls) instead of refusing it, so no call is refused while a slot and a rate token within
// its wait are there for it; it serves one call per identity per turn, so
// a's second and third calls (later turns) give their places to c1 and c2
// (first turns) and are refused; the rest of the c's find the 21 places
// taken by first turns that came before them and are refused at once (at
// t=0, not after waiting). Grants come one per 100 ms in arrival order of
// first turns: a, b1..b18, c1, c2.
func TestReviewGateHoldsAMovedWaveInFairOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(10, 1, 64, 2050*time.Millisecond, nil)
		hold := make(chan struct{})
		var wave []string
		wave = append(wave, "a", "b1", "a", "b2", "a")
		for i := 3; i <= 18; i++ {
			wave = append(wave, fmt.Sprint("b", i))
		}
		for i := 1; i <= 19; i++ {
			wave = append(wave, fmt.Sprint("c", i))
		}
		start := time.Now()
		var mu sync.Mutex
		var granted []string
		grantedAt := map[string]time.Duration{}
		refusedAt := map[string][]time.Duration{}
		var wg sync.WaitGroup
		for _, who := range wave {
			wg.Go(func() {
				release, err := g.Enter(context.Background(), who)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					refusedAt[who] = append(refusedAt[who], time.Since(start))
					return
				}
				granted = append(granted, who)
				grantedAt[who] = time.Since(start)
				go func() { <-hold; release() }() // in flight to the end
			})
			synctest.Wait() // queued (or refused) before the next arrives
		}
		wg.Wait()
		close(hold)

		want := []string{"a"}
		for i := 1; i <= 18; i++ {
			want = append(want, fmt.Sprint("b", i))
		}
		want = append(want, "c1", "c2")
		if fmt.Sprint(granted) != fmt.Sprint(want) {
			t.Errorf("granted in the order %v\nwant %v", granted, want)
		}
		for k, who := range want {
			if at := grantedAt[who]; at != time.Duration(k)*100*time.Millisecond {
				t.Errorf("%s (turn %d) granted at %s, want %s: one per rate token, none left unused", who, k, at, time.Duration(k)*100*time.Millisecond)
			}
		}
		wantRefused := map[string]int{"a": 2}
		for i := 3; i <= 19; i++ {
			wantRefused[fmt.Sprint("c", i)] = 1
		}
		got := map[string]int{}
		for who, ats := range refusedAt {
			got[who] = len(ats)
			for _, at := range ats {
				if at != 0 {
					t.Errorf("%s refused at %s, want at once (0s): it cannot be served within its wait", who, at)
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(wantRefused) {
			t.Errorf("refused (identity: calls) %v\nwant %v", got, wantRefused)
		}
	})
}
