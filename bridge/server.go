package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wirekube/relay-ws/bridge/internal/identitycheck"
	"github.com/wirekube/relay-ws/bridge/internal/peerlimit"
	"github.com/wirekube/relay-ws/bridge/internal/reexport"
	"github.com/wirekube/relay-ws/bridge/internal/revocationclient"
	"github.com/wirekube/relay-ws/bridge/internal/sessionlist"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/room"
)

// Server is the bridge. Create it with New, serve it with Run (or mount
// Handler and AdminHandler yourself and call Drain). Safe for concurrent use.
type Server struct {
	cfg        *Config
	log        *slog.Logger
	metrics    *metrics
	gatherer   prometheus.Gatherer
	reexport   prometheus.Gatherer // reexport.Path's; nil without --reexport-metrics
	upgrader   websocket.Upgrader
	bufs       *bufPool
	ready      *readiness
	relay      *relayDialer  // every dial to the raw relay goes through it
	closeGrace time.Duration // time a client gets to answer our close frame
	// resolvePeers and ownAddrs answer whether a drain's sessions have
	// another replica to go to (handover.go).
	resolvePeers  func(ctx context.Context, host string) ([]string, error)
	ownAddrs      func() map[netip.Addr]bool
	revoker       *revocationclient.Client // ends sessions whose authorization ended
	owners        keyOwners                // the session of each registered key
	probeUpgrader websocket.Upgrader
	hold          *relayHold             // upgrades waiting for the relay (hold.go)
	peers         peerAdmission          // per-peer bounds, key-mismatch windows (peeradmit.go)
	signatures    *identitycheck.Checker // the identity headers' signature and its keys (internal/identitycheck)
	full          atomic.Bool            // past the --unready-at mark (fullready.go)
	bounceDice    func() float64         // the bounce draw, uniform in [0, 1): math/rand (bounce.go); tests set it
	bounceLingers atomic.Int32           // bounced connections waiting for the client's close (bounce.go)

	// Idle readers (park.go): parking is on while Run serves; the poller
	// is made at the first park.
	parkMu  sync.Mutex
	parking bool
	poller  *poller

	// The session listing (bridge/internal/sessionlist): its own index,
	// its bounds; nil without --debug-sessions.
	listing *sessionlist.Listing

	mu       sync.Mutex
	draining bool
	slots    int // admitted requests: dialing, upgrading or in a session
	sessions map[*session]struct{}
	seq      uint64        // the last session's seq (sessioninfo.go)
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
	revoker, err := revocationclient.New(cfg.RevocationOptions, logger, reg)
	if err != nil {
		return nil, fmt.Errorf("bridge: metrics: %w", err)
	}
	pod, err := reexport.New(reg, cfg.ReexportMetrics, &http.Client{Timeout: reexport.Timeout}, reexport.MaxBytes)
	if err != nil {
		return nil, fmt.Errorf("bridge: metrics: %w", err)
	}
	s := &Server{
		cfg: cfg, log: logger, metrics: m, gatherer: reg, reexport: pod, bufs: newBufPool(), relay: relay,
		closeGrace: 2 * time.Second, sessions: make(map[*session]struct{}),
		resolvePeers: cfg.ResolvePeers, ownAddrs: interfaceAddrs,
		revoker: revoker,
		listing: newListing(cfg),
		peers: peerAdmission{limits: peerlimit.New(cfg.MaxSessionsPerPeer, cfg.MaxUnregisteredPerPeer),
			backoff: peerlimit.NewBackoff(cfg.KeyMismatchBackoffMax, peerlimit.BackoffEntries, time.Now),
			strikes: m.keyBackoffStrikes, log: logger},
	}
	if s.resolvePeers == nil {
		s.resolvePeers = net.DefaultResolver.LookupHost
	}
	s.upgrader, s.probeUpgrader = s.upgraders()
	s.bounceDice = rand.Float64
	s.ready = &readiness{probe: s.probeRelay, now: time.Now, fresh: 5 * time.Second, probeInterval: time.Second,
		probeTimeout: cfg.RelayDialTimeout + time.Second}
	s.hold = newRelayHold(cfg.RelayWaitMax, s.probeRelay, s.ready.markOK)
	if s.signatures, err = identitycheck.New(cfg.SignatureOptions, cfg.KeysReloadOptions, logger, reg); err != nil {
		return nil, err
	}
	if err := registerStateMetrics(reg, s); err != nil {
		return nil, fmt.Errorf("bridge: metrics: %w", err)
	}
	return s, nil
}

// upgraders builds the upgrader of sessions and the one of probes, which
// differs only in its subprotocol (probemode.go).
func (s *Server) upgraders() (session, probe websocket.Upgrader) {
	session = websocket.Upgrader{
		HandshakeTimeout: s.cfg.WriteTimeout,
		// The bridge reads client frames itself (internal/wsframe), so
		// gorilla's read buffer is never used: keep it at its minimum.
		// Write buffers come from a shared pool and are held only while a
		// message is written.
		ReadBufferSize:  readBufferSize,
		WriteBufferSize: 16 << 10,
		WriteBufferPool: &sync.Pool{},
		Subprotocols:    []string{contract.Subprotocol},
		CheckOrigin:     s.originAllowed,
		Error:           s.upgradeError,
	}
	probe = session
	probe.Subprotocols = []string{contract.SubprotocolProbe}
	return session, probe
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
	mux.HandleFunc(room.Path, s.handleRoom) // for an extauthz beside this bridge (bounce.go)
	if s.reexport != nil {
		mux.Handle(reexport.Path, promhttp.HandlerFor(s.reexport, promhttp.HandlerOpts{}))
	}
	if s.cfg.DebugSessions {
		mux.Handle(contract.SessionsPath, s.listing)
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
	s.observeFull() // a gauge only: full is healthy (fullready.go)
	if err := s.ready.check(r.Context()); err != nil {
		http.Error(w, "relay unreachable", http.StatusServiceUnavailable)
		return
	}
	_, _ = fmt.Fprintln(w, "ok")
}

// registerStateMetrics registers the gauges read from s when scraped, and
// the configured limits, so that alerts and dashboards can compare usage
// with them (sessions_active / sessions_limit) without knowing the flags.
func registerStateMetrics(reg prometheus.Registerer, s *Server) error {
	const ns = metricsNamespace
	limit := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "sessions_limit",
		Help: "The --max-sessions cap: beyond it upgrades get 503 at_capacity."})
	limit.Set(float64(s.cfg.MaxSessions))
	drainRate := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "drain_rate_limit",
		Help: "The --drain-rate pace: sessions a drain closes per second (0: spread over half of --drain-timeout)."})
	drainRate.Set(s.cfg.DrainRate)
	backoffLen := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "key_mismatch_backoff_identities",
		Help: "Identities remembered by the key-mismatch backoff (bounded LRU)."},
		func() float64 { return float64(s.peers.backoff.Len()) })
	peers := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "peers_active",
		Help: "WireKubePeers with at least one admitted request (per-peer limits)."},
		func() float64 { return float64(s.peers.limits.Len()) })
	return register(reg, limit, drainRate, backoffLen, peers)
}
