package bridge

import (
	"sync"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// listGate bounds the session listing (/debug/sessions): one listing at a
// time, from the table walk to the last byte written (a slow reader holds
// its turn, not a lock a session needs), and a bucket of
// contract.SessionsListBurst listings refilled at SessionsListRate a
// second. The zero value is ready (a full bucket). Safe for concurrent use.
type listGate struct {
	mu     sync.Mutex
	busy   bool
	tokens float64   // listings left in the bucket, as of at
	at     time.Time // zero: the bucket is full
}

// enter takes the listing's turn at now, or returns why not.
func (g *listGate) enter(now time.Time) contract.Reason {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.busy {
		return contract.ReasonSessionsListBusy
	}
	tokens := float64(contract.SessionsListBurst)
	if !g.at.IsZero() {
		tokens = min(tokens, g.tokens+now.Sub(g.at).Seconds()*contract.SessionsListRate)
	}
	if tokens < 1 {
		return contract.ReasonSessionsListRate
	}
	g.busy, g.tokens, g.at = true, tokens-1, now
	return ""
}

// leave ends the turn enter gave.
func (g *listGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy = false
}

// sessionIndex is the listing's own copy of the session table, kept only
// with --debug-sessions: a sync.Map, whose Range holds no lock that
// admitting or ending a session takes, so a listing never holds the
// server's session-table lock (s.mu, taken by every upgrade) for a walk of
// 20,000 sessions. A session is added before it can be listed and removed
// when it ends; a listing sees each session present during its whole walk.
type sessionIndex struct {
	on bool
	m  sync.Map // *session -> struct{}
}

func (x *sessionIndex) add(sess *session) {
	if x.on {
		x.m.Store(sess, struct{}{})
	}
}

func (x *sessionIndex) remove(sess *session) {
	if x.on {
		x.m.Delete(sess)
	}
}

// snapshot returns the indexed sessions' pointers.
func (x *sessionIndex) snapshot() []*session {
	var all []*session
	x.m.Range(func(k, _ any) bool {
		all = append(all, k.(*session))
		return true
	})
	return all
}
