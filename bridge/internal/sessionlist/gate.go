package sessionlist

import (
	"sync"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// gate bounds the session listing (/debug/sessions): one listing at a
// time, from the table walk to the last byte written (a slow reader holds
// its turn, not a lock a session needs), and a bucket of
// contract.SessionsListBurst listings refilled at SessionsListRate a
// second. The zero value is ready (a full bucket). Safe for concurrent use.
type gate struct {
	mu     sync.Mutex
	busy   bool
	tokens float64   // listings left in the bucket, as of at
	at     time.Time // zero: the bucket is full
}

// enter takes the listing's turn at now, or returns why not.
func (g *gate) enter(now time.Time) contract.Reason {
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
func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy = false
}
