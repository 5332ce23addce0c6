package testagent

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/wirekube/relay-ws/relayproto"
)

// Policy is an agent's reconnect policy. AgentPolicy is the real WireKube
// agent's (v0.0.17, measured through this gateway; docs/spec.md#agent).
type Policy struct {
	// HandshakeTimeout bounds dial + TLS + upgrade.
	HandshakeTimeout time.Duration
	// First is the wait after a disconnect (and after a first failed dial).
	First time.Duration
	// Max caps the wait, which doubles after each failed dial.
	Max time.Duration
}

// AgentPolicy: 10 s to upgrade; after a disconnect wait 1 s, then double
// after each failed dial (1, 2, 4, 8, 16 s, cap 30 s); a finished upgrade
// resets it. The agent never sends a close frame (it closes TCP) and
// ignores Retry-After.
var AgentPolicy = Policy{HandshakeTimeout: 10 * time.Second, First: time.Second, Max: 30 * time.Second}

// Outcome is how an attempt ended, for Backoff.
type Outcome int

const (
	// Disconnected: the attempt upgraded (the agent counts that as
	// "connected") and the session has ended since.
	Disconnected Outcome = iota
	// DialFailed: no upgrade (refused, unreachable, timed out).
	DialFailed
)

// Backoff is the wait state of Policy. The zero wait means nothing failed
// yet. Not safe for concurrent use.
type Backoff struct {
	p    Policy
	wait time.Duration
}

// NewBackoff starts a backoff with policy p.
func NewBackoff(p Policy) *Backoff { return &Backoff{p: p} }

// Next returns the wait before the next dial after an attempt that ended
// with o.
func (b *Backoff) Next(o Outcome) time.Duration {
	switch {
	case o == Disconnected || b.wait == 0:
		b.wait = b.p.First
	default:
		b.wait = min(2*b.wait, b.p.Max)
	}
	return b.wait
}

// Reconnector is an agent that stays connected the way the real one does
// (Policy), while exchanging Data frames with a peer agent to measure the
// data path: every Interval it sends a Data frame to Peer and one to its
// own key. It records when frames from the peer arrive (the gaps are the
// data-path downtime) and every session it had, so a test can tell a real
// session (its own echo came back) from a false "connected" (an upgrade
// the server closed before anything flowed).
type Reconnector struct {
	Options  Options
	Key      relayproto.Key
	Peer     relayproto.Key
	Policy   Policy        // zero: AgentPolicy
	Interval time.Duration // zero: 100 ms
	// GapAfter is the silence from the peer recorded as a gap; zero: three
	// intervals.
	GapAfter time.Duration

	mu       sync.Mutex
	sessions []SessionRecord
	dials    []DialRecord
	lastPeer time.Time
	gaps     []Gap
}

// SessionRecord is one upgraded session.
type SessionRecord struct {
	// Dialed is when its dial began; the upgrade finished at Upgraded.
	Dialed, Upgraded, Ended time.Time
	// Live: the session's own echo came back (the relay carried it).
	Live bool
	// ClosedByServer: it ended with a close frame or a dropped connection,
	// not because the agent stopped.
	ClosedByServer bool
	CloseCode      int
	CloseText      string
}

// FalseConnected reports an upgrade the server ended before the session
// carried anything: the agent logged "connected" for nothing.
func (s SessionRecord) FalseConnected() bool { return s.ClosedByServer && !s.Live }

// DialRecord is one dial that did not upgrade.
type DialRecord struct {
	Dialed time.Time // when the dial began
	At     time.Time // when it failed
	Status int       // HTTP status, 0 without an answer
	Reason string    // X-WireKube-Deny-Reason
	Err    string
}

// Gap is a stretch without frames from the peer, longer than GapAfter.
type Gap struct{ From, To time.Time }

// Len is the gap's length.
func (g Gap) Len() time.Duration { return g.To.Sub(g.From) }

// Run dials and redials until ctx is done.
func (r *Reconnector) Run(ctx context.Context) {
	p := r.Policy
	if p == (Policy{}) {
		p = AgentPolicy
	}
	b := NewBackoff(p)
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			if sleep(ctx, b.Next(r.lastOutcome())) != nil {
				return
			}
		}
		r.attempt(ctx, p)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// lastOutcome is how the latest attempt ended.
func (r *Reconnector) lastOutcome() Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lastSess, lastDial time.Time
	if n := len(r.sessions); n > 0 {
		lastSess = r.sessions[n-1].Upgraded
	}
	if n := len(r.dials); n > 0 {
		lastDial = r.dials[n-1].At
	}
	if lastDial.After(lastSess) {
		return DialFailed
	}
	return Disconnected
}

// attempt is one dial and, when it upgrades, the session until it ends.
func (r *Reconnector) attempt(ctx context.Context, p Policy) {
	o := r.Options
	o.HandshakeTimeout = p.HandshakeTimeout
	dialed := time.Now()
	dctx, cancel := context.WithTimeout(ctx, p.HandshakeTimeout)
	c, err := Dial(dctx, o, r.Key)
	cancel()
	if err != nil {
		d := DialRecord{Dialed: dialed, At: time.Now(), Err: err.Error()}
		var de *DialError
		if errors.As(err, &de) {
			d.Status, d.Reason = de.Status, de.Reason
		}
		r.mu.Lock()
		r.dials = append(r.dials, d)
		r.mu.Unlock()
		return
	}
	rec := SessionRecord{Dialed: dialed, Upgraded: time.Now()}
	r.serve(ctx, c, &rec)
	rec.Ended = time.Now()
	r.mu.Lock()
	r.sessions = append(r.sessions, rec)
	r.mu.Unlock()
}

// serve exchanges frames until the session ends or ctx is done, then
// closes TCP without a close frame, as the agent does.
func (r *Reconnector) serve(ctx context.Context, c *Conn, rec *SessionRecord) {
	interval := r.Interval
	if interval == 0 {
		interval = 100 * time.Millisecond
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the sender; owned: waited for below
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for seq := uint64(0); ; seq++ {
			p := binary.BigEndian.AppendUint64(nil, seq)
			if c.SendData(r.Peer, p) != nil || c.SendData(r.Key, p) != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-ctx.Done():
				c.Abort()
				return
			case <-t.C:
			}
		}
	}()
	for {
		src, _, err := c.ReadData(time.Hour)
		if err != nil {
			rec.ClosedByServer = ctx.Err() == nil
			if ce := CloseOf(err); ce != nil {
				rec.CloseCode, rec.CloseText = ce.Code, ce.Text
			}
			break
		}
		switch {
		case src.Equal(r.Key):
			rec.Live = true
		case src.Equal(r.Peer):
			r.peerFrame(time.Now(), cmp.Or(r.GapAfter, 3*interval))
		}
	}
	close(stop)
	c.Abort()
	wg.Wait()
}

// peerFrame records a frame from the peer and any gap before it.
func (r *Reconnector) peerFrame(now time.Time, minGap time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.lastPeer.IsZero() && now.Sub(r.lastPeer) > minGap {
		r.gaps = append(r.gaps, Gap{From: r.lastPeer, To: now})
	}
	r.lastPeer = now
}

// Report is what a Reconnector saw.
type Report struct {
	Sessions []SessionRecord
	Dials    []DialRecord
	Gaps     []Gap
	LastPeer time.Time // last frame from the peer
}

// Report returns a copy of the records so far.
func (r *Reconnector) Report() Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Report{Sessions: append([]SessionRecord(nil), r.sessions...), Dials: append([]DialRecord(nil), r.dials...),
		Gaps: append([]Gap(nil), r.gaps...), LastPeer: r.lastPeer}
}

// LongestGapSince is the longest stretch without peer frames that ended
// after since (0 when none).
func (rep Report) LongestGapSince(since time.Time) time.Duration {
	var longest time.Duration
	for _, g := range rep.Gaps {
		if g.To.After(since) {
			longest = max(longest, g.Len())
		}
	}
	return longest
}

// FalseConnected counts upgrades the server ended before anything flowed.
func (rep Report) FalseConnected() int {
	n := 0
	for _, s := range rep.Sessions {
		if s.FalseConnected() {
			n++
		}
	}
	return n
}
