package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/identitysig"
	"github.com/wirekube/relay-ws/relayproto"
)

// Server is the bridge. Create it with New, serve it with Run (or mount
// Handler and AdminHandler yourself and call Drain). Safe for concurrent use.
type Server struct {
	cfg           *Config
	log           *slog.Logger
	metrics       *metrics
	gatherer      prometheus.Gatherer
	upgrader      websocket.Upgrader
	bufs          *bufPool
	ready         *readiness
	relay         *relayDialer  // every dial to the raw relay goes through it
	closeGrace    time.Duration // time a client gets to answer our close frame
	revoker       *revoker      // ends sessions whose authorization ended
	owners        keyOwners     // the session of each registered key
	probeUpgrader websocket.Upgrader
	hold          *relayHold            // upgrades waiting for the relay (hold.go)
	peers         *peerLimits           // per-peer bounds (peerlimit.go)
	backoff       *keyBackoff           // key-mismatch windows (backoff.go)
	signatures    *identitysig.Verifier // nil: the signature check is off (signature.go)

	// Idle readers (park.go): parking is on while Run serves; the poller
	// is made at the first park.
	parkMu  sync.Mutex
	parking bool
	poller  *poller

	mu       sync.Mutex
	draining bool
	slots    int // admitted requests: dialing, upgrading or in a session
	sessions map[*session]struct{}
	seq      uint64        // the last session's seq (sessionlist.go)
	idle     chan struct{} // closed when slots reaches 0 during a drain
}

// New builds a Server from the completed cfg. Metrics are registered on reg
// (also served on /metrics of AdminHandler); a nil logger discards.
func New(cfg *Config, logger *slog.Logger, reg *prometheus.Registry) (*Server, error) {
	if cfg == nil || cfg.dial == nil {
		return nil, errors.New("bridge: New needs a Config from Options.Complete")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("bridge: metrics: %w", err)
	}
	dm, err := newDialMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("bridge: metrics: %w", err)
	}
	relay, err := newRelayDialer(cfg.RelayAddr, cfg.ResolveRelay, cfg.dial, cfg.RelayDialTimeout, dm)
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	rm, err := newRevocationMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("bridge: metrics: %w", err)
	}
	s := &Server{
		cfg: cfg, log: logger, metrics: m, gatherer: reg, bufs: newBufPool(), relay: relay,
		closeGrace: 2 * time.Second, sessions: make(map[*session]struct{}),
		revoker: newRevoker(cfg, logger, rm),
		peers:   newPeerLimits(cfg.MaxSessionsPerPeer, cfg.MaxUnregisteredPerPeer),
		backoff: newKeyBackoff(cfg.KeyMismatchBackoffMax, keyBackoffEntries),
	}
	s.upgrader = websocket.Upgrader{
		HandshakeTimeout: cfg.WriteTimeout,
		// The bridge reads client frames itself (wsdecode.go), so gorilla's
		// read buffer is never used: keep it at its minimum. Write buffers
		// come from a shared pool and are held only while a message is
		// written.
		ReadBufferSize:  readBufferSize,
		WriteBufferSize: 16 << 10,
		WriteBufferPool: &sync.Pool{},
		Subprotocols:    []string{contract.Subprotocol},
		CheckOrigin:     s.originAllowed,
		Error:           s.upgradeError,
	}
	s.probeUpgrader = s.upgrader
	s.probeUpgrader.Subprotocols = []string{contract.SubprotocolProbe} // probemode.go
	s.ready = &readiness{probe: s.probeRelay, now: time.Now, fresh: 5 * time.Second, probeInterval: time.Second,
		probeTimeout: cfg.RelayDialTimeout + time.Second}
	s.hold = newRelayHold(cfg.RelayWaitMax, s.probeRelay, s.ready.markOK)
	if s.signatures, err = newSignatureCheck(cfg, logger, reg); err != nil {
		return nil, err
	}
	if err := registerStateMetrics(reg, s); err != nil {
		return nil, fmt.Errorf("bridge: metrics: %w", err)
	}
	return s, nil
}

// readBufferSize is gorilla's per-connection read buffer (unused; 125 is
// gorilla's floor). Not 0: that would keep net/http's 4 KiB reader alive.
const readBufferSize = 128

// Handler serves the relay path, /healthz and /readyz (the main listener).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(s.cfg.Path, s.handleRelay)
	mux.HandleFunc("/healthz", s.handleHealthz)
	mux.HandleFunc("/readyz", s.handleReadyz)
	return mux
}

// AdminHandler serves /healthz, /readyz, /metrics and, with
// DebugSessions, the session listing (the metrics listener).
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", s.handleHealthz)
	mux.HandleFunc("/readyz", s.handleReadyz)
	mux.Handle("/metrics", promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}))
	if s.cfg.DebugSessions {
		mux.HandleFunc(contract.SessionsPath, s.handleSessions)
	}
	return mux
}

func (s *Server) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	_, _ = fmt.Fprintln(w, "ok")
}

func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if s.isDraining() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	if s.revocationUnready(w) {
		return
	}
	if err := s.ready.check(r.Context()); err != nil {
		http.Error(w, "relay unreachable", http.StatusServiceUnavailable)
		return
	}
	_, _ = fmt.Fprintln(w, "ok")
}

func (s *Server) probeRelay(ctx context.Context) error {
	start := time.Now()
	c, err := s.relay.dial(ctx)
	s.metrics.observeDial(time.Since(start), err)
	if err != nil {
		return err
	}
	return c.Close()
}

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// acquire admits one more request into the session count, or says why not.
func (s *Server) acquire() contract.Reason {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.draining:
		return contract.ReasonDraining
	case s.slots >= s.cfg.MaxSessions:
		return contract.ReasonAtCapacity
	}
	s.slots++
	return ""
}

func (s *Server) releaseSlot() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slots--
	if s.slots == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// serveSession runs an upgraded session; finishSession logs and counts it
// at its end and releases its slot. It runs in the goroutine handleRelay
// starts for the session, which may end before the session does when it
// parks (park.go).
func (s *Server) serveSession(ws *websocket.Conn, relay net.Conn, id peerIdentity, remote string, ticket *peerTicket) {
	sess := newSession(s, ws, relay, id, remote)
	sess.ticket = ticket

	s.mu.Lock()
	s.seq++
	sess.seq = s.seq
	s.sessions[sess] = struct{}{}
	draining := s.draining
	s.mu.Unlock()
	s.metrics.sessionsActive.Inc()
	s.revoker.add(sess)
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "session started",
		append(sess.logAttrs(), slog.String("subprotocol", ws.Subprotocol()))...)
	if draining { // admitted just before the drain began
		sess.end(closeWith(websocket.CloseGoingAway, contract.CloseDraining, nil))
	}

	sess.serve()
}

// finishSession is the end of serveSession, in the goroutine that ran the
// session's client reader last.
func (s *Server) finishSession(sess *session, ce *closeError) {
	defer s.releaseSlot()
	s.revoker.remove(sess)
	s.owners.release(sess)
	s.onSessionEnd(sess, ce)

	s.mu.Lock()
	delete(s.sessions, sess)
	s.mu.Unlock()
	s.metrics.sessionsActive.Dec()
	s.logEnd(sess, ce)
}

func (s *Server) logEnd(sess *session, ce *closeError) {
	d := time.Since(sess.start)
	s.metrics.sessions.WithLabelValues(string(ce.reason)).Inc()
	s.metrics.sessionDuration.Observe(d.Seconds())
	attrs := append(sess.logAttrs(),
		slog.Duration("duration", d),
		slog.Int64("bytes_to_relay", sess.bytesToRelay.Load()),
		slog.Int64("bytes_to_client", sess.bytesToClient.Load()),
		slog.Int("close_code", ce.code),
		slog.String("close_reason", string(ce.reason)))
	level := slog.LevelInfo
	if ce.err != nil {
		attrs = append(attrs, slog.String("error", ce.err.Error()))
	}
	if ce.code == websocket.ClosePolicyViolation || ce.code == websocket.CloseMessageTooBig {
		level = slog.LevelWarn
	}
	s.log.LogAttrs(context.Background(), level, "session ended", attrs...)
}

// countMessage counts a binary message from the client.
func (sess *session) countMessage() error {
	sess.toRelayCounts.message()
	return nil
}

// countToRelay counts one client frame, forwarded or dropped.
func (sess *session) countToRelay(t relayproto.FrameType, size int, forwarded bool) {
	sess.toRelayCounts.frame(t, size)
	if !forwarded {
		sess.srv.metrics.droppedUnknown.Inc()
	}
}
