// Package peerlimit is the bridge's per-peer admission limits: the
// sessions and unregistered sessions one WireKubePeer may hold (Limits),
// its probes and their close linger (probe.go), and the key-mismatch
// backoff of one identity (Backoff). It answers with the contract's reason
// codes; the HTTP answer (status, Retry-After), the log lines and the
// metrics stay with the bridge, which reads Len for its gauges.
package peerlimit

import (
	"sync"

	"github.com/wirekube/relay-ws/internal/contract"
)

// Limits bounds what one WireKubePeer may hold: at most maxSessions
// admitted requests (held for the relay, upgrading or in a session), of
// which at most maxUnregistered have not verified their Register yet. The
// defaults (2 and 1) fit the agent's live session plus the replacement it
// dials during a reconnect (the relay, and the bridge's session_replaced,
// then close the older one), and keep a single identity from taking the
// global slots with sessions that never register. Memory is one entry per
// peer with an admitted request; an entry goes with its last request.
type Limits struct {
	maxSessions, maxUnregistered int

	mu    sync.Mutex
	peers map[string]*peerCount
}

// peerCount is one peer's share. probes and lingering count its probes
// apart from its sessions (probe.go).
type peerCount struct{ sessions, unregistered, probes, lingering int }

func (c *peerCount) idle() bool { return *c == peerCount{} }

// New returns the limits of --max-sessions-per-peer and
// --max-unregistered-per-peer.
func New(maxSessions, maxUnregistered int) *Limits {
	return &Limits{maxSessions: maxSessions, maxUnregistered: maxUnregistered, peers: map[string]*peerCount{}}
}

// Ticket is one admitted request of a peer. Its methods are safe for
// concurrent use; Release must be called exactly once, MarkRegistered at
// most once before it (later calls do nothing).
type Ticket struct {
	l          *Limits
	peer       string
	mu         sync.Mutex
	registered bool
	released   bool
	probe      bool // a probe's ticket: counts in probes only
}

// Acquire admits one more unregistered request of peer, or says why not.
func (l *Limits) Acquire(peer string) (*Ticket, contract.Reason) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.peers[peer]
	if c == nil {
		c = &peerCount{}
	}
	switch {
	case c.sessions >= l.maxSessions:
		return nil, contract.ReasonPeerSessionLimit
	case c.unregistered >= l.maxUnregistered:
		return nil, contract.ReasonPeerUnregisteredLimit
	}
	c.sessions++
	c.unregistered++
	l.peers[peer] = c
	return &Ticket{l: l, peer: peer}, ""
}

// MarkRegistered moves the request out of the unregistered bound.
func (t *Ticket) MarkRegistered() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.registered || t.released || t.probe {
		return
	}
	t.registered = true
	t.l.mu.Lock()
	t.l.peers[t.peer].unregistered--
	t.l.mu.Unlock()
}

// Release ends the request's share of both bounds.
func (t *Ticket) Release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.released {
		return
	}
	t.released = true
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	c := t.l.peers[t.peer]
	switch {
	case t.probe:
		c.probes--
	case !t.registered:
		c.unregistered--
		fallthrough
	default:
		c.sessions--
	}
	if c.idle() {
		delete(t.l.peers, t.peer)
	}
}

// Len is the number of peers with an admitted request (the metric).
func (l *Limits) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.peers)
}
