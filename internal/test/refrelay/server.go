package refrelay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/wirekube/relay-ws/relayproto"
)

// ErrServing is returned by a second call to Serve on the same Server.
var ErrServing = errors.New("refrelay: Serve already called")

// Server is the reference relay. Create it with New; it serves one listener
// once. All its methods are safe for concurrent use.
type Server struct {
	cfg   config
	stats counters

	mu       sync.RWMutex // read-locked on the per-frame lookup
	serving  bool
	closing  bool
	conns    map[net.Conn]struct{}       // every open connection, closed at shutdown
	sessions map[relayproto.Key]*session // the live session of each key
	regs     map[relayproto.Key]int      // Register count per key, never shrinks
	changed  chan struct{}               // closed and replaced at each registration
}

// New returns a Server configured by opts.
func New(opts Options) (*Server, error) {
	cfg, err := opts.complete()
	if err != nil {
		return nil, err
	}
	return &Server{
		cfg:      cfg,
		conns:    make(map[net.Conn]struct{}),
		sessions: make(map[relayproto.Key]*session),
		regs:     make(map[relayproto.Key]int),
		changed:  make(chan struct{}),
	}, nil
}

// Serve accepts connections on ln until ctx is done, then closes ln, the UDP
// socket and every connection, waits for every goroutine it started, and
// returns nil. Serve owns ln (it is closed on return). If ln is closed by
// someone else, Serve returns that error after the same cleanup.
//
// When ln is a TCP listener and UDP is not disabled, Serve also opens a UDP
// socket on the same address and drops what it receives. A UDP bind failure
// is logged and Serve goes on: nothing this fixture forwards uses UDP.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.startServing(); err != nil {
		ln.Close()
		return err
	}
	var wg sync.WaitGroup
	pc := s.openUDP(ln.Addr())
	if pc != nil {
		wg.Go(func() { s.drainUDP(pc) })
	}
	// Closing the listener is what unblocks Accept when ctx is done.
	stopped := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { defer close(stopped); ln.Close() })
	s.cfg.log.Info("reference relay (test fixture) listening", "addr", ln.Addr().String())
	err := s.acceptLoop(ctx, ln, &wg)
	if !stop() && ctx.Err() != nil {
		<-stopped
	}
	ln.Close()
	if pc != nil {
		pc.Close()
	}
	s.closeAll()
	wg.Wait()
	return err
}

func (s *Server) startServing() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serving {
		return ErrServing
	}
	s.serving = true
	return nil
}

// acceptLoop runs until the listener is closed. An Accept error other than
// a closed listener (EMFILE under a large benchmark, for example) is logged
// and retried with a growing pause, as net/http does, so the fixture does
// not vanish under load. Each connection's goroutine is counted in wg.
func (s *Server) acceptLoop(ctx context.Context, ln net.Listener, wg *sync.WaitGroup) error {
	var pause time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("refrelay: accept: %w", err)
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.cfg.log.Warn("accept failed, retrying", "err", err, "pause", pause)
			sleepCtx(ctx, pause)
			continue
		}
		pause = 0
		s.stats.connections.Add(1)
		if !s.track(conn) {
			conn.Close()
			continue
		}
		wg.Go(func() {
			defer s.untrack(conn)
			s.handleConn(conn)
		})
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// track records conn so that shutdown can close it; false when shutting down.
func (s *Server) track(conn net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.conns[conn] = struct{}{}
	return true
}

func (s *Server) untrack(conn net.Conn) {
	conn.Close()
	s.mu.Lock()
	delete(s.conns, conn)
	s.mu.Unlock()
}

// closeAll closes every tracked connection; their goroutines then end.
func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	for c := range s.conns {
		c.Close()
	}
}

// handleConn reads the first frame and dispatches on it. It owns conn and
// every goroutine it starts; untrack closes conn after it returns.
//
// There is deliberately no read deadline on the first frame: the real relay
// has none, and the bridge relies on that while it waits for the agent's
// Register.
func (s *Server) handleConn(conn net.Conn) {
	var buf [relayproto.KeySize]byte
	f, err := relayproto.ReadFrame(conn, buf[:])
	if err != nil {
		s.readFailed(conn, "first frame", err)
		return
	}
	switch {
	case f.Type == relayproto.TypeRegister && len(f.Body) == relayproto.KeySize:
		k, _ := relayproto.KeyFromBytes(f.Body)
		s.runSession(conn, k)
	case isControlFirst(f.Type):
		s.refuseControl(conn, f.Type)
	default:
		s.stats.firstFrameRejected.Add(1)
		s.cfg.log.Info("first frame rejected, closing",
			"remote", conn.RemoteAddr().String(), "type", f.Type.String(), "len", len(f.Body))
	}
}

// isControlFirst reports the types that open a one-shot control session on
// the real relay. ForwarderStats (0x12) is not one of them (docs/spec.md#raw-relay).
func isControlFirst(t relayproto.FrameType) bool {
	switch t {
	case relayproto.TypeForwarderRegister, relayproto.TypeForwarderUnregister, relayproto.TypeIngressProbe:
		return true
	}
	return false
}

// refuseControl answers a control first frame with one Error frame. The
// write has the stall timeout so a client that does not read cannot hold it.
func (s *Server) refuseControl(conn net.Conn, t relayproto.FrameType) {
	s.stats.controlRefused.Add(1)
	s.cfg.log.Info("control session refused", "remote", conn.RemoteAddr().String(), "type", t.String())
	_ = conn.SetWriteDeadline(time.Now().Add(s.cfg.stall))
	if err := relayproto.WriteFrame(conn, relayproto.TypeError, []byte(ControlRefusedText)); err != nil {
		s.cfg.log.Info("control refusal not delivered", "err", err)
	}
}

// readFailed counts and logs a read error that ends a connection.
func (s *Server) readFailed(conn net.Conn, what string, err error) {
	if errors.Is(err, relayproto.ErrEmptyFrame) || errors.Is(err, relayproto.ErrFrameTooLarge) {
		s.stats.badLength.Add(1)
		s.cfg.log.Info("bad frame length, closing", "remote", conn.RemoteAddr().String(), "during", what, "err", err)
	}
}
