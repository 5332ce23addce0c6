// Package roomwatch keeps the room of the bridge beside this extauthz
// (internal/room, docs/steering.md): it reads the bridge's GET
// /room every Interval and hands the last answer to the decision while it
// is fresh, so that a replica past its full mark turns a new agent away
// before a TokenReview is spent on it. A room older than StaleAfter is not
// handed out: extauthz then steers nothing and the bridge's own cap
// (--max-sessions) still holds.
package roomwatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/room"
)

const (
	// Interval is how often the room is read.
	Interval = time.Second
	// Timeout bounds one read, its body included.
	Timeout = 500 * time.Millisecond
	// StaleAfter is how long a read room is used: three reads missed, and
	// the bridge's count may have moved by a rolling update's wave.
	StaleAfter = 3 * time.Second
)

// metricsNamespace prefixes the watch's metrics (extauthz's own).
const metricsNamespace = contract.MetricsNamespaceExtauthz

// Fetch reads one /room answer: at most room.MaxBody+1 bytes, so that
// room.Parse refuses a longer one.
type Fetch func(ctx context.Context) ([]byte, error)

// Watch is the last room read and when. Safe for concurrent use.
type Watch struct {
	fetch    Fetch
	now      func() time.Time
	log      *slog.Logger
	failures prometheus.Counter

	mu      sync.Mutex
	last    room.Room
	at      time.Time // when the last good read was sent; zero: none yet
	failing bool      // the last read failed: logged once per change
}

// New reads rawURL (validated by Options.Validate) over HTTP; its metrics
// go on reg. now nil is time.Now.
func New(rawURL string, reg prometheus.Registerer, log *slog.Logger, now func() time.Time) (*Watch, error) {
	return newWatch(HTTPFetch(rawURL), reg, log, now)
}

func newWatch(fetch Fetch, reg prometheus.Registerer, log *slog.Logger, now func() time.Time) (*Watch, error) {
	if now == nil {
		now = time.Now
	}
	w := &Watch{fetch: fetch, now: now, log: log,
		failures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "bridge_room_poll_failures_total",
			Help: "Reads of the bridge's GET /room (--bridge-room-url) that failed: unreachable, timeout, a status other than 200, a bad body."}),
	}
	sessions := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "bridge_room_sessions",
		Help: "Sessions the bridge held at the last good read of its room."}, func() float64 { return float64(w.lastRoom().Sessions) })
	share := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "bridge_room_share",
		Help: "Share of new relay sessions extauthz bounces: the fresh room's, 0 while the room is stale or unread."},
		func() float64 { r, ok := w.Room(); return ternary(ok, r.Share(), 0) })
	fresh := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "bridge_room_fresh",
		Help: "1 while the bridge's room was read within the last 3 s (extauthz steers), else 0."},
		func() float64 { _, ok := w.Room(); return ternary(ok, 1.0, 0) })
	for _, c := range []prometheus.Collector{w.failures, sessions, share, fresh} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("roomwatch metrics: %w", err)
		}
	}
	return w, nil
}

func ternary(cond bool, a, b float64) float64 {
	if cond {
		return a
	}
	return b
}

// Room is the last room read, and whether it is fresh (read at most
// StaleAfter ago). Not fresh: the caller steers nothing.
func (w *Watch) Room() (room.Room, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, !w.at.IsZero() && w.now().Sub(w.at) <= StaleAfter
}

func (w *Watch) lastRoom() room.Room {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Run reads the room at once and then every Interval until ctx is done.
func (w *Watch) Run(ctx context.Context) {
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		_ = w.Poll(ctx) // counted and logged there
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll reads the room once, within Timeout. A failed read is counted and
// keeps the last room (which goes stale); the first failure after a
// success, and the first success after failures, are logged.
func (w *Watch) Poll(ctx context.Context) error {
	sent := w.now()
	rctx, cancel := context.WithTimeout(ctx, Timeout)
	b, err := w.fetch(rctx)
	cancel()
	var r room.Room
	if err == nil {
		r, err = room.Parse(b)
	}
	w.mu.Lock()
	changed := w.failing != (err != nil)
	w.failing = err != nil
	if err == nil {
		w.last, w.at = r, sent
	}
	w.mu.Unlock()
	if err != nil {
		w.failures.Inc()
	}
	switch {
	case changed && err != nil:
		w.log.Warn("bridge room unreadable: not steering once the last read is 3s old", "error", err)
	case changed:
		w.log.Info("bridge room readable again", "sessions", r.Sessions, "full_at", r.FullAt, "max_sessions", r.Max)
	}
	return err
}

// errStatus: the bridge answered, not with 200.
var errStatus = errors.New("roomwatch: status not 200")

// HTTPFetch reads rawURL with a client of its own: no proxy, no redirect
// followed (a 3xx is a failed read), the body bounded.
func HTTPFetch(rawURL string) Fetch {
	c := &http.Client{
		// A connection per read (one a second, on loopback): nothing idles
		// between reads, and nothing outlives the watch.
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return func(ctx context.Context) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
		if err != nil {
			return nil, fmt.Errorf("roomwatch: %w", err)
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, fmt.Errorf("roomwatch: %w", err)
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%w: %d", errStatus, resp.StatusCode)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, room.MaxBody+1))
		if err != nil {
			return nil, fmt.Errorf("roomwatch: %w", err)
		}
		return b, nil
	}
}
