package bridge

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// relayHold holds upgrades while the relay is unreachable (--relay-wait):
// instead of 503 relay_unavailable at once, which the agent
// answers with its doubling backoff (a 15 s outage cost 31 s), a request
// waits up to --relay-wait, unanswered, while one redial loop per bridge
// (not one per request) checks the relay every redialEvery. When a dial
// succeeds every held request dials its own relay connection and is
// upgraded; when the wait ends it gets 503 relay_unavailable. A request is
// never upgraded without its own relay connection.
//
// Held requests take no session slot (so a flood of them cannot crowd out
// sessions when the relay returns) and count against their own bound,
// --relay-wait-max: beyond it 503 relay_wait_full at once. Each peer can
// hold at most its unregistered share (internal/peerlimit), so one identity cannot
// fill the bound either. The drain answers every held request 503 draining.
type relayHold struct {
	max         int
	redialEvery time.Duration
	probe       func(ctx context.Context) error // one dial, closed at once
	onUp        func()

	mu      sync.Mutex
	held    int
	down    bool          // the redial loop runs: the relay is known down
	up      chan struct{} // closed when the redial loop reaches the relay
	stopped chan struct{} // closed by stop (drain)
	stopOne sync.Once
	loop    sync.WaitGroup
}

// redialEvery is how often the held requests' redial loop dials.
const redialEvery = 200 * time.Millisecond

func newRelayHold(max int, probe func(context.Context) error, onUp func()) *relayHold {
	return &relayHold{max: max, redialEvery: redialEvery, probe: probe, onUp: onUp,
		up: make(chan struct{}), stopped: make(chan struct{})}
}

// knownDown reports whether the redial loop runs; a new request then goes
// straight to the hold instead of spending its own dial.
func (h *relayHold) knownDown() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down
}

// enter adds one held request and returns the channel closed when the
// relay is next reachable, or the reason it may not wait.
func (h *relayHold) enter() (<-chan struct{}, contract.Reason) {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.stopped:
		return nil, contract.ReasonDraining
	default:
	}
	if h.held >= h.max {
		return nil, contract.ReasonRelayWaitFull
	}
	h.held++
	if !h.down {
		h.down = true
		h.loop.Add(1)
		go h.redial() // owned: stops when nobody is held, on success or stop; stop waits
	}
	return h.up, ""
}

// next is the channel of the next time the relay is reachable (after a
// wake-up whose own dial failed).
func (h *relayHold) next() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.down && h.held > 0 {
		h.down = true
		h.loop.Add(1)
		go h.redial() // owned as in enter
	}
	return h.up
}

func (h *relayHold) leave() {
	h.mu.Lock()
	h.held--
	h.mu.Unlock()
}

// redial dials until the relay answers, nobody is held any more, or stop.
func (h *relayHold) redial() {
	defer h.loop.Done()
	t := time.NewTicker(h.redialEvery)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := h.probe(ctx)
		cancel()
		h.mu.Lock()
		switch {
		case err == nil:
			close(h.up)
			h.up, h.down = make(chan struct{}), false
			h.mu.Unlock()
			h.onUp()
			return
		case h.held == 0:
			h.down = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		select {
		case <-t.C:
		case <-h.stopped:
			h.mu.Lock()
			h.down = false
			h.mu.Unlock()
			return
		}
	}
}

// stop answers every held request (they see stopped) and waits for the
// redial loop. Later enters get draining.
func (h *relayHold) stop() {
	h.stopOne.Do(func() { close(h.stopped) })
	h.loop.Wait()
}

// connectRelay takes a session slot and dials the relay; when the relay is
// unreachable and --relay-wait is set, it holds the request (see
// relayHold). It returns the relay connection with a slot taken, or the
// deny reason with none.
func (s *Server) connectRelay(ctx context.Context) (net.Conn, contract.Reason, error) {
	if reason := s.acquire(); reason != "" {
		return nil, reason, nil
	}
	var lastErr error
	if !s.hold.knownDown() || s.cfg.RelayWait <= 0 {
		c, err := s.dialRelay(ctx)
		if err == nil {
			return c, "", nil
		}
		lastErr = err
	}
	s.releaseSlot()
	if s.cfg.RelayWait <= 0 {
		return nil, contract.ReasonRelayUnavailable, lastErr
	}
	return s.holdForRelay(ctx, lastErr)
}

// holdForRelay waits, unanswered, for the relay (see relayHold).
func (s *Server) holdForRelay(ctx context.Context, lastErr error) (net.Conn, contract.Reason, error) {
	up, reason := s.hold.enter()
	if reason != "" {
		return nil, reason, lastErr
	}
	defer s.hold.leave()
	s.metrics.relayHeld.Inc()
	defer s.metrics.relayHeld.Dec()
	start := time.Now()
	wait := time.NewTimer(s.cfg.RelayWait)
	defer wait.Stop()
	for {
		select {
		case <-up:
		case <-wait.C:
			s.metrics.observeHold(time.Since(start), "timeout")
			return nil, contract.ReasonRelayUnavailable, lastErr
		case <-ctx.Done(): // the client gave up: nobody reads the answer
			s.metrics.observeHold(time.Since(start), "client_gone")
			return nil, contract.ReasonRelayUnavailable, ctx.Err()
		case <-s.hold.stopped:
			s.metrics.observeHold(time.Since(start), "draining")
			return nil, contract.ReasonDraining, nil
		}
		if reason := s.acquire(); reason != "" {
			s.metrics.observeHold(time.Since(start), "refused")
			return nil, reason, nil
		}
		c, err := s.dialRelay(ctx)
		if err == nil {
			s.metrics.observeHold(time.Since(start), "relay_up")
			return c, "", nil
		}
		s.releaseSlot()
		lastErr, up = err, s.hold.next()
	}
}
