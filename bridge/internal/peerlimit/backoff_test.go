package peerlimit

import (
	"testing"
	"time"

	"github.com/wirekube/relay-ws/relayproto"
)

func TestKeyBackoffWindows(t *testing.T) {
	clock := &backoffClock{now: time.Unix(1000, 0)}
	b := NewBackoff(8*time.Second, 2, clock.Now)
	a := Identity{Peer: "node-a", Subject: "sa-a", Key: testKey(1)}
	var windows []time.Duration
	for range 6 {
		w := b.Strike(a)
		windows = append(windows, w)
		if left, refused := b.Refused(a); !refused || left != w {
			t.Fatalf("right after a strike: refused %v left %s, want %s", refused, left, w)
		}
		clock.Advance(w)
		if _, refused := b.Refused(a); refused {
			t.Fatalf("still refused after the %s window", w)
		}
	}
	want := []time.Duration{1, 2, 4, 8, 8, 8}
	for i := range want {
		if windows[i] != want[i]*time.Second {
			t.Fatalf("windows %v, want %v seconds", windows, want)
		}
	}

	b.Reset(a)
	if w := b.Strike(a); w != time.Second {
		t.Fatalf("after a verified Register the window is %s, want 1s", w)
	}
	fixed := a
	fixed.Key = testKey(9) // the WireKubePeer's key changed
	if _, refused := b.Refused(fixed); refused {
		t.Fatal("a changed peer key is still refused")
	}
	if _, refused := b.Refused(a); refused {
		t.Fatal("the strikes survived the key change")
	}

	b.Strike(a)
	b.Strike(a)
	clock.Advance(2*time.Second + 8*time.Second + time.Millisecond) // quiet for a whole max after the window
	if w := b.Strike(a); w != time.Second {
		t.Fatalf("after a quiet period the window is %s, want 1s", w)
	}

	// Bounded: the LRU keeps 2 identities.
	for i := range 5 {
		b.Strike(Identity{Peer: "p", Subject: string(rune('a' + i)), Key: testKey(1)})
	}
	if b.Len() != 2 {
		t.Fatalf("LRU holds %d identities, want 2", b.Len())
	}
}

// backoffClock is a clock the test moves (one goroutine).
type backoffClock struct{ now time.Time }

func (c *backoffClock) Now() time.Time          { return c.now }
func (c *backoffClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

func testKey(b byte) relayproto.Key {
	var k relayproto.Key
	for i := range k {
		k[i] = b + byte(i)
	}
	return k
}
