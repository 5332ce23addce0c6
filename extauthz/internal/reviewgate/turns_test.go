package reviewgate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// gateLog records, in order, the identities whose calls the gate granted.
type gateLog struct {
	mu      sync.Mutex
	granted []string
}

func (l *gateLog) add(who string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.granted = append(l.granted, who)
}

func (l *gateLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.granted)
}

// TestReviewGateLoneIdentityUsesEverySlot: an identity alone in the gate
// gets every slot at once; there is no fixed share to stop it.
func TestReviewGateLoneIdentityUsesEverySlot(t *testing.T) {
	g := New(1000, 1000, 8, time.Second, nil)
	var releases []func()
	for i := range 8 {
		release, err := g.Enter(context.Background(), "alone")
		if err != nil {
			t.Fatalf("call %d of 8 of the only identity: %v", i+1, err)
		}
		releases = append(releases, release)
	}
	for _, r := range releases {
		r()
	}
}

// enterInOrder starts one caller per name, each queued before the next
// starts (synctest.Wait between them), holding its slot until it receives
// from hold (or hold is closed); log records the grants.
func enterInOrder(t *testing.T, g *Gate, names []string, log *gateLog, hold <-chan struct{}, wg *sync.WaitGroup) {
	for _, who := range names {
		wg.Go(func() {
			release, err := g.Enter(context.Background(), who)
			if err != nil {
				t.Errorf("%s: %v", who, err)
				<-hold // the test steps once per caller
				return
			}
			log.add(who)
			<-hold
			release()
		})
		synctest.Wait()
	}
}

// TestReviewGateServesIdentitiesInTurns: with one slot, held by a call of
// a, calls queue as a a a, then b b b, then c. Each identity's first
// waiting call is served before anyone's second, and a, which already had
// a call served, comes after b and c in the first turn; after that a and
// b alternate (a first: its calls came first). Arrival order alone would
// serve a a a b b b c.
func TestReviewGateServesIdentitiesInTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(1e6, 1e6, 1, time.Minute, nil)
		log := &gateLog{}
		hold := make(chan struct{})
		var wg sync.WaitGroup
		enterInOrder(t, g, []string{"a", "a", "a", "a", "b", "b", "b", "c"}, log, hold, &wg)
		close(hold) // each call releases its slot as soon as it has it
		wg.Wait()
		want := []string{"a", "b", "c", "a", "b", "a", "b", "a"}
		if got := log.list(); !slices.Equal(got, want) {
			t.Errorf("served %v, want %v", got, want)
		}
	})
}

// TestReviewGateNewcomerServedOnTheNextSlot: 4 and then 16 identities
// flood the gate with three calls each (every slot busy, the rest queued);
// an agent that arrives then is served in the first turn: after each
// flooding identity's first call, before any identity's second.
func TestReviewGateNewcomerServedInTheFirstTurn(t *testing.T) {
	for _, flooders := range []int{4, 16} {
		t.Run(fmt.Sprint(flooders, " identities"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(1e6, 1e6, 4, time.Minute, nil)
				log := &gateLog{}
				hold := make(chan struct{})
				var wg sync.WaitGroup
				var names []string
				for i := range 3 * flooders {
					names = append(names, fmt.Sprint("flood-", i%flooders))
				}
				enterInOrder(t, g, names, log, hold, &wg)
				enterInOrder(t, g, []string{"agent"}, log, hold, &wg)
				// One call ends at a time: each grant is logged before the
				// next call ends, so the log is the gate's order.
				for range len(names) + 1 {
					hold <- struct{}{}
					synctest.Wait()
				}
				wg.Wait()
				// Every flooding identity's first call came before the agent
				// with the same standing; no second call may.
				got := log.list()
				if i := slices.Index(got, "agent"); i != flooders {
					t.Errorf("the agent was served %dth (grants %v), want %dth: after each identity's first call, before any second", i+1, got, flooders+1)
				}
			})
		})
	}
}

// TestReviewGatePushesOutTheIdentityFurthestAhead: the rate fills the
// queue with one identity's calls (10 per second, 1.05 s of wait: room for
// 10 once the burst token is spent). Its next call is refused at once (it
// would only wait behind its own); an agent arriving then takes the place
// of that identity's newest queued call and is served in the first turn:
// after the flood's first queued call, which came first with the same
// standing, and before all its others.
func TestReviewGatePushesOutTheIdentityFurthestAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(10, 1, 4, 1050*time.Millisecond, nil)
		log := &gateLog{}
		var wg sync.WaitGroup
		call := func(who, label string) {
			wg.Go(func() {
				release, err := g.Enter(context.Background(), who)
				if errors.Is(err, ErrThrottled) {
					log.add(label + " refused")
					return
				}
				must(t, err)
				log.add(label + " served")
				release()
			})
			synctest.Wait()
		}
		for i := range 12 {
			call("flood", fmt.Sprint("flood", i))
		}
		call("agent", "agent")
		wg.Wait()
		want := []string{"flood0 served", "flood11 refused", "flood10 refused", "flood1 served", "agent served"}
		for i := 2; i <= 9; i++ {
			want = append(want, fmt.Sprintf("flood%d served", i))
		}
		if got := log.list(); !slices.Equal(got, want) {
			t.Errorf("events %v\nwant %v", got, want)
		}
	})
}

// TestReviewGateRefusedCallGivesItsTurnBack: with one slot, held by a call
// of a, b queues three calls and a a fourth, which gives up (its context
// ends) before it is served; a's next call then takes the turn the refused
// one left, between b's second and third: b b a b. Had a kept the turn it
// never used, b's third would come first: b b b a.
func TestReviewGateRefusedCallGivesItsTurnBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(1e6, 1e6, 1, time.Minute, nil)
		log := &gateLog{}
		hold := make(chan struct{})
		var wg sync.WaitGroup
		enterInOrder(t, g, []string{"a"}, log, hold, &wg) // holds the only slot
		enterInOrder(t, g, []string{"b", "b", "b"}, log, hold, &wg)
		ctx, cancel := context.WithCancel(context.Background())
		refused := make(chan error, 1)
		go func() {
			_, err := g.Enter(ctx, "a")
			refused <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-refused; !errors.Is(err, ErrThrottled) {
			t.Fatalf("a's call whose context ended while queued: %v, want %v", err, ErrThrottled)
		}
		enterInOrder(t, g, []string{"a"}, log, hold, &wg)
		close(hold)
		wg.Wait()
		want := []string{"a", "b", "b", "a", "b"}
		if got := log.list(); !slices.Equal(got, want) {
			t.Errorf("served %v, want %v", got, want)
		}
	})
}
