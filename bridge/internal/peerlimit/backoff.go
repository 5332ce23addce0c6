package peerlimit

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/wirekube/relay-ws/relayproto"
)

// BackoffEntries bounds the identities the key-mismatch backoff
// remembers; the least recently struck one is forgotten first (it then
// starts again at a 1 s window). 16,384 entries are about 2 MiB.
const BackoffEntries = 16384

// Backoff is the server-side backoff for a wrong key: a Register with
// another key than the peer's can only be seen after the upgrade, and the
// agent counts every finished upgrade as "connected" and retries after 1 s
// forever. After a register_key_mismatch the identity's next upgrades are
// refused before 101 (403 register_key_mismatch) for a window that doubles
// per repeat: 1 s, 2 s, 4 s, ... up to max. A verified Register resets it,
// and so does a change of the peer's key (the X-WireKube-Public-Key header
// differs from the one that mismatched: the WireKubePeer was fixed). An
// identity quiet for a whole max after its window starts again at 1 s.
// Safe for concurrent use.
type Backoff struct {
	max time.Duration
	now func() time.Time

	mu  sync.Mutex
	lru *simplelru.LRU[backoffID, *strikes]
}

// Identity is what the backoff is kept for: the authenticated identity,
// the peer it is bound to and the peer's key its Register must carry.
type Identity struct {
	Subject, Peer string
	Key           relayproto.Key
}

// backoffID is the authenticated identity and the peer it is bound to.
type backoffID struct{ subject, peer string }

type strikes struct {
	key   relayproto.Key // the peer key the mismatch was against
	n     int            // mismatches in a row
	until time.Time      // end of the current window
}

// NewBackoff returns a backoff whose windows are capped at max, that
// remembers at most size identities (BackoffEntries in the bridge) and
// reads the time from now (time.Now in the bridge).
func NewBackoff(max time.Duration, size int, now func() time.Time) *Backoff {
	l, err := simplelru.NewLRU[backoffID, *strikes](size, nil)
	if err != nil { // only for size <= 0
		panic(err)
	}
	return &Backoff{max: max, now: now, lru: l}
}

func idOf(id Identity) backoffID { return backoffID{subject: id.Subject, peer: id.Peer} }

// Strike records a register_key_mismatch of id and returns the new window.
func (b *Backoff) Strike(id Identity) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e, ok := b.lru.Get(idOf(id))
	if !ok || !e.key.Equal(id.Key) || now.After(e.until.Add(b.max)) {
		e = &strikes{key: id.Key}
	}
	e.n++
	window := b.window(e.n)
	e.until = now.Add(window)
	b.lru.Add(idOf(id), e)
	return window
}

// window is 1 s doubled per strike after the first, capped at max.
func (b *Backoff) window(n int) time.Duration {
	w := time.Second
	for i := 1; i < n && w < b.max; i++ {
		w *= 2
	}
	return min(w, b.max)
}

// Refused reports whether id is inside its window, and how long remains.
// A changed peer key forgets the strikes.
func (b *Backoff) Refused(id Identity) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.lru.Peek(idOf(id))
	if !ok {
		return 0, false
	}
	if !e.key.Equal(id.Key) {
		b.lru.Remove(idOf(id))
		return 0, false
	}
	left := e.until.Sub(b.now())
	return left, left > 0
}

// Reset forgets id's strikes (a verified Register).
func (b *Backoff) Reset(id Identity) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lru.Remove(idOf(id))
}

// Len is the number of identities remembered (the metric).
func (b *Backoff) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lru.Len()
}
