package bridge

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
)

// drainCloses registers n sessions on b and returns a channel that gets,
// for each, the time its 1001 draining close arrived.
func drainCloses(t *testing.T, b *bubble, n int) <-chan time.Time {
	t.Helper()
	at := make(chan time.Time, n)
	for i := range n {
		ws, _ := b.register(t, testKey(byte(40+i)))
		go func() {
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					var ce *websocket.CloseError
					if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway || ce.Text != string(contract.CloseDraining) {
						t.Errorf("session %d ended with %v, want 1001 draining", i, err)
					}
					at <- time.Now()
					return
				}
			}
		}()
	}
	return at
}

// The replicas a fake headless Service answers: this Pod's own address is
// 10.0.0.1; another replica, 10.0.0.2, joins when ready is set.
func fakeReplicas(ready *atomic.Bool) func(context.Context, string) ([]string, error) {
	return func(_ context.Context, host string) ([]string, error) {
		if host != "replicas.test" {
			return nil, errors.New("unexpected name " + host)
		}
		if ready.Load() {
			return []string{"10.0.0.1", "10.0.0.2"}, nil
		}
		return []string{"10.0.0.1"}, nil
	}
}

func ownAddr10001() map[netip.Addr]bool {
	return map[netip.Addr]bool{netip.MustParseAddr("10.0.0.1"): true}
}

func closeTimes(t *testing.T, at <-chan time.Time, n int, start time.Time) []time.Duration {
	t.Helper()
	var got []time.Duration
	for range n {
		got = append(got, (<-at).Sub(start))
	}
	slices.Sort(got)
	return got
}

// startReplicaBubble is a bubble bridge at 127.0.0.1:10001 draining for
// 30 s at rate (0: spread) whose --drain-peers answer names another
// replica while ready holds.
func startReplicaBubble(t *testing.T, ready *atomic.Bool, rate float64) *bubble {
	t.Helper()
	b := startBubble(t, func(o *Options) {
		o.DrainTimeout = 30 * time.Second
		o.DrainRate = rate
		o.DrainPeers = "replicas.test"
		o.ResolvePeers = fakeReplicas(ready)
	})
	b.srv.ownAddrs = ownAddr10001
	return b
}

// TestDrainHoldsSessionsUntilAnotherReplicaIsReady: with --drain-peers and
// only this Pod's own address in the answer, no session is closed; the
// next poll after another replica appears starts the handover, spread over
// half the drain timeout.
func TestDrainHoldsSessionsUntilAnotherReplicaIsReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ready atomic.Bool
		b := startReplicaBubble(t, &ready, 0)
		at := drainCloses(t, b, 2)
		start := time.Now()
		go b.stop()
		time.Sleep(5500 * time.Millisecond)
		synctest.Wait()
		if n := len(at); n != 0 {
			t.Fatalf("%d sessions closed while no other replica was ready", n)
		}
		ready.Store(true) // polled at 6 s
		// 6 s, then 6 s + 15 s (half of the 30 s timeout).
		want := []time.Duration{6 * time.Second, 21 * time.Second}
		if got := closeTimes(t, at, 2, start); !slices.Equal(got, want) {
			t.Errorf("sessions closed at %v after the drain began, want %v", got, want)
		}
	})
}

// TestDrainWithNoReplicaClosesAllAtTheEnd: when no other replica comes up
// (the name does not resolve), every session stays open until the drain
// timeout less the close margin (grace 0.5 s + 1 s), then all close at
// once, before the cut, whatever --drain-rate says (set here to one a
// second, which would take until 30.5 s).
func TestDrainWithNoReplicaClosesAllAtTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startBubble(t, func(o *Options) {
			o.DrainTimeout = 30 * time.Second
			o.DrainRate = 1
			o.DrainPeers = "replicas.test"
			o.ResolvePeers = func(context.Context, string) ([]string, error) {
				return nil, errors.New("no such host")
			}
		})
		b.srv.ownAddrs = ownAddr10001
		at := drainCloses(t, b, 3)
		start := time.Now()
		b.stop()
		want := []time.Duration{28500 * time.Millisecond, 28500 * time.Millisecond, 28500 * time.Millisecond}
		if got := closeTimes(t, at, 3, start); !slices.Equal(got, want) {
			t.Errorf("sessions closed at %v after the drain began, want %v", got, want)
		}
		if !strings.Contains(b.logs.String(), `"replica_ready":false`) {
			t.Errorf("no log of the hold ending without a replica:\n%s", b.logs.String())
		}
	})
}

// TestDrainWithAReplicaReady: another replica in the answer from the
// start: the closes begin at once and spread over half the timeout, or,
// with --drain-rate, at that pace (two a second: 0, 0.5, 1 s).
func TestDrainWithAReplicaReady(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate float64
		want []time.Duration
	}{
		{"spread over half the timeout", 0, []time.Duration{0, 7500 * time.Millisecond, 15 * time.Second}},
		{"at the drain rate", 2, []time.Duration{0, 500 * time.Millisecond, time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var ready atomic.Bool
				ready.Store(true)
				b := startReplicaBubble(t, &ready, tc.rate)
				at := drainCloses(t, b, 3)
				start := time.Now()
				b.stop()
				if got := closeTimes(t, at, 3, start); !slices.Equal(got, tc.want) {
					t.Errorf("sessions closed at %v after the drain began, want %v", got, tc.want)
				}
			})
		})
	}
}
