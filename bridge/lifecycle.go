package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/netutil"
)

// ListenAndRun opens Options.Listen and Options.MetricsListen (unless
// empty) and calls Run.
func (s *Server) ListenAndRun(ctx context.Context) error {
	ln, err := netutil.Listen(s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	var adminLn net.Listener
	if s.cfg.MetricsListen != "" {
		if adminLn, err = netutil.Listen(s.cfg.MetricsListen); err != nil {
			_ = ln.Close()
			return fmt.Errorf("--metrics-listen: %w", err)
		}
	}
	return s.Run(ctx, ln, adminLn)
}

// Run serves Handler on ln and AdminHandler on adminLn (nil: none) until
// ctx is done, then drains (see Drain) and returns. It closes both
// listeners. The error is nil after a drain, or the first serve failure.
func (s *Server) Run(ctx context.Context, ln, adminLn net.Listener) error {
	servers, listeners := s.httpServers(ln, adminLn)
	s.startParking()
	defer s.stopParking() // after the drain: no session is left
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { errc <- srv.Serve(listeners[i]) }()
	}
	defer s.runBackground(ctx)()
	s.log.Info("bridge serving", slog.String("listen", ln.Addr().String()),
		slog.String("relay", s.cfg.RelayAddr), slog.String("path", s.cfg.Path))

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc: // a listener failed: drain and report it
	}
	return s.shutdown(servers, errc, serveErr)
}

// httpServers builds the relay listener's server and, with adminLn, the
// metrics listener's. Timeouts cover plain HTTP requests (probes,
// denials); upgraded connections are hijacked and follow the session
// rules instead.
func (s *Server) httpServers(ln, adminLn net.Listener) ([]*http.Server, []net.Listener) {
	newServer := func(h http.Handler) *http.Server {
		return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	}
	servers := []*http.Server{newServer(s.Handler())}
	listeners := []net.Listener{ln}
	if adminLn != nil {
		servers = append(servers, newServer(s.AdminHandler()))
		listeners = append(listeners, adminLn)
	}
	return servers, listeners
}

// runBackground starts the key reload and the revocation stream, and
// returns what stops and awaits them. The revocation stream outlives ctx
// until that call, after the drain: sessions still open during the drain
// stay revocable.
func (s *Server) runBackground(ctx context.Context) (stop func()) {
	reloaded := make(chan struct{})
	go func() { // owned: received in stop
		defer close(reloaded)
		s.signatures.Run(ctx)
	}()
	rctx, stopRevoker := context.WithCancel(context.WithoutCancel(ctx))
	revoked := make(chan error, 1)
	go func() { revoked <- s.revoker.Run(rctx) }()
	return func() {
		stopRevoker()
		if err := <-revoked; err != nil {
			s.log.Error("revocation stream", slog.String("error", err.Error()))
		}
		<-reloaded
	}
}

// shutdown drains and closes the servers and reports the first serve
// error. The main listener closes first, so a front with another bridge
// retries there (nginx proxy_next_upstream, Envoy retry_on
// connect-failure); see docs/bridge.md "Drain". Requests already in (held
// ones are answered 503 draining at once) finish; /readyz on the metrics
// listener fails.
func (s *Server) shutdown(servers []*http.Server, errc <-chan error, serveErr error) error {
	s.beginDrain()
	refused := make(chan struct{})
	go func() { // owned: received below
		defer close(refused)
		sctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
		defer cancel()
		_ = servers[0].Shutdown(sctx)
	}()
	s.Drain()
	<-refused
	// Hijacked conns are ours, not the servers'.
	for _, srv := range servers {
		_ = srv.Close()
	}
	for range len(servers) - boolInt(serveErr != nil) {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) && serveErr == nil {
			serveErr = err
		}
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("bridge: serve: %w", serveErr)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Drain makes /readyz fail and new upgrades get 503 draining at once, then
// closes open sessions with 1001 in the order handover.go chooses: when
// another replica can take them (or --drain-peers is not set), at
// DrainRate a second or else spread over the first half of DrainTimeout,
// so clients do not all reconnect at the same instant; kept open until a
// replica can take them otherwise. It
// returns when the last session is gone or DrainTimeout has passed (then
// the remaining connections are cut). Calling it again waits again.
func (s *Server) Drain() {
	start := time.Now()
	deadline := time.NewTimer(s.cfg.DrainTimeout)
	defer deadline.Stop()
	s.beginDrain()
	mode := drainUnknown
	if s.cfg.DrainPeers != "" {
		mode = drainHold
		if s.otherReplicas(context.Background()) > 0 {
			mode = drainHandover
		}
	}
	open, idle := s.openSessions()
	s.logDrain(mode, len(open))
	spread, rate := s.cfg.DrainTimeout/2, s.cfg.DrainRate
	if mode == drainHold && len(open) > 0 {
		margin := s.holdMargin()
		release := time.NewTimer(s.cfg.DrainTimeout - time.Since(start) - margin)
		found := s.holdForReplica(release.C, idle)
		release.Stop()
		if found {
			spread = min(spread, max(s.cfg.DrainTimeout-time.Since(start)-margin, 0))
		} else {
			// Nowhere to go: close all as late as the handshake allows;
			// no pace either, the timeout is near.
			spread, rate = 0, 0
		}
		s.log.Info("drain hold over", slog.Bool("replica_ready", found), slog.Duration("held", time.Since(start)))
		open, idle = s.openSessions()
	}
	s.closeSpread(open, spread, rate, idle, deadline.C)
}

// openSessions returns the open sessions and the channel closed when none
// is left.
func (s *Server) openSessions() ([]*session, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	open := make([]*session, 0, len(s.sessions))
	for sess := range s.sessions {
		open = append(open, sess)
	}
	return open, s.idleLocked()
}

// closeSpread closes open with 1001 draining, one every drainStep (the
// first at once), then waits for the sessions to end or for deadline,
// which cuts what is left.
func (s *Server) closeSpread(open []*session, spread time.Duration, rate float64, idle <-chan struct{}, deadline <-chan time.Time) {
	step := drainStep(len(open), spread, rate)
	s.metrics.drainPending.Set(float64(len(open)))
	defer s.metrics.drainPending.Set(0)
	tick := time.NewTicker(max(step, time.Nanosecond))
	defer tick.Stop()
	for i, sess := range open {
		if i > 0 && step > 0 {
			select {
			case <-tick.C:
			case <-idle:
			case <-deadline:
				s.cut()
				return
			}
		}
		sess.end(closeWith(websocket.CloseGoingAway, contract.CloseDraining, nil))
		s.metrics.drainPending.Set(float64(len(open) - i - 1))
	}
	select {
	case <-idle:
	case <-deadline:
		s.cut()
	}
}

// drainStep is the pause between two closes of a drain of n sessions:
// 1/rate when a rate is set (the other replicas admit the moved agents at
// about that pace), else spread (the window the closes may take) over
// them. A zero spread without a rate closes all at once.
func drainStep(n int, spread time.Duration, rate float64) time.Duration {
	if rate > 0 {
		return time.Duration(float64(time.Second) / rate)
	}
	if n > 1 {
		return spread / time.Duration(n-1)
	}
	return 0
}

// beginDrain makes /readyz fail and new upgrades get 503 draining, and
// answers the upgrades held for the relay (hold.go) at once.
func (s *Server) beginDrain() {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	s.hold.stop()
}

// idleLocked returns a channel closed when no request is admitted.
func (s *Server) idleLocked() <-chan struct{} {
	if s.slots == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	return s.idle
}

// cut closes every remaining session's connections after the drain timeout
// and waits for their handlers, which return promptly once both are closed.
func (s *Server) cut() {
	s.mu.Lock()
	idle := s.idleLocked()
	for sess := range s.sessions {
		_ = sess.ws.Close()
		_ = sess.relay.Close()
		sess.end(closeWith(0, contract.CloseDraining, errors.New("drain timeout")))
	}
	s.mu.Unlock()
	s.log.Warn("drain timeout: cut the remaining sessions")
	<-idle
}
