package bridge

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/bridge/internal/peerlimit"
	"github.com/wirekube/relay-ws/bridge/internal/revocationclient"
	"github.com/wirekube/relay-ws/bridge/internal/wsframe"
	"github.com/wirekube/relay-ws/internal/contract"
)

// session is one upgraded client and its relay connection. The goroutine
// handleRelay starts for it runs the client reader and starts the relay
// reader (serve); either may park while idle (park.go), and the client
// reader that stops last finishes the session; timers (pings, the register
// deadline) run their callbacks only through fromTimer, so none outlives
// the session.
type session struct {
	srv    *Server
	ws     *websocket.Conn
	relay  net.Conn
	id     peerIdentity
	remote string
	start  time.Time

	filter                frameFilter
	regNoted              bool // registered() ran for the verified Register
	dec                   wsframe.Decoder
	raw                   streamBuf // client bytes: decoded (inLen) then not yet decoded
	inLen                 int       // decoded client -> relay stream bytes at the start of raw
	out                   streamBuf // relay -> client bytes not yet sent
	fromClient, fromRelay pumpIO    // each reader goroutine's reads and writes (pumpio.go)

	// lingered counts client bytes dropped after end; lingerRaw is set
	// when they are dropped without decoding. Client reader only.
	lingered  int
	lingerRaw bool
	// lingerUntil is the close grace's end once the close frame is out,
	// zero if it is not: written by closeClient, read by the client reader
	// only after inflight.Wait (lingerRead).
	lingerUntil time.Time
	// closeErr is why closeClient could not write the close frame: written
	// by it, read by the teardown's log line after inflight.Wait.
	closeErr error

	// The relay -> client writer (writeframe.go): direct is the client
	// socket when messages bypass gorilla's write buffer; wlock orders the
	// close frame after data (closeSent); whdr is the frame header the relay
	// reader goroutine writes before each message (pumpIO.write).
	direct    net.Conn
	wlock     writeLock
	closeSent bool
	whdr      [10]byte

	// Counter updates batched per forwarded run or message, one per
	// direction's goroutine.
	toRelayCounts, toClientCounts frameCounts

	// lastRefresh is when the client read deadline was last pushed back,
	// lastRead when a registered client's bytes were last read; only the
	// client reader uses them.
	lastRefresh, lastRead time.Time

	// Bytes and frames each way, written by one goroutine each (bytes once
	// per write, frames once per counted batch, never per frame) and read
	// by the session listing (sessioninfo.go) while the session runs.
	bytesToRelay, bytesToClient   atomic.Int64
	framesToRelay, framesToClient atomic.Int64

	// seq names the session in the listing: the Server's counter at
	// serveSession, increasing, never reused. Set before the session is
	// listed; read-only after.
	seq uint64

	ticket *peerlimit.Ticket // the peer's share of the per-peer limits (peeradmit.go)

	mu       sync.Mutex
	result   *closeError    // set once by end
	inflight sync.WaitGroup // timer callbacks running
	pinger   *time.Timer
	regTimer *time.Timer

	// rev is the session as the revocation client watches it (its name on
	// the stream, its expiry timer). Set by serveSession before run.
	rev revocationclient.Watched

	// Idle readers (park.go): parkable is set when readers may park, park
	// is the server's poller once one has; relayRun counts the relay reader's goroutine or its
	// parked state. Under mu: relayParked and clientParked while the poller
	// holds that connection, silenceAt the client's silence deadline
	// meanwhile, pingAt when the pinger fires next. parkID and armed
	// belong to the poller. relayLast is when the relay reader last sent
	// the client a message (lastRead: see lastRefresh).
	parkable                  bool
	park                      *poller
	relayRun                  sync.WaitGroup
	relayParked, clientParked bool
	silenceAt, pingAt         time.Time
	parkID                    uint64
	armed                     [2]bool
	relayLast                 time.Time
}

// streamBuf is a pooled buffer held only while it has unconsumed bytes.
type streamBuf struct {
	b *[]byte
	n int
}

func (s *session) take(sb *streamBuf) []byte {
	if sb.b == nil {
		sb.b = s.srv.bufs.get()
	}
	return *sb.b
}

func (s *session) release(sb *streamBuf) {
	if sb.b != nil && sb.n == 0 {
		s.srv.bufs.put(sb.b)
		sb.b = nil
	}
}

// newSession arms the register deadline and the pinger; run must follow.
func newSession(srv *Server, ws *websocket.Conn, relay net.Conn, id peerIdentity, remote string) *session {
	s := &session{srv: srv, ws: ws, relay: relay, id: id, remote: remote, start: time.Now()}
	s.filter = frameFilter{key: id.Key, onFrame: s.countToRelay, onRegister: s.claimKey}
	m := srv.metrics
	s.toRelayCounts = frameCounts{counters: m.toRelay, messages: m.messagesToRelay, total: &s.framesToRelay}
	s.toClientCounts = frameCounts{counters: m.toClient, messages: m.messagesToClient, total: &s.framesToClient}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.regTimer = time.AfterFunc(srv.cfg.RegisterTimeout, func() {
		s.fromTimer(func() {
			s.end(closeWith(websocket.ClosePolicyViolation, contract.CloseRegisterTimeout, nil))
		})
	})
	s.pingAt = s.start.Add(srv.cfg.PingInterval)
	s.pinger = time.AfterFunc(srv.cfg.PingInterval, func() { s.fromTimer(s.ping) })
	s.dec = wsframe.Decoder{OnControl: s.onControl, OnMessage: s.countMessage}
	s.fromClient.init(s, ws.NetConn())
	s.fromRelay.init(s, relay)
	s.direct = directConn(ws.NetConn(), &s.fromClient)
	s.parkable = srv.parkingOn()
	return s
}

// serve serves the session: it starts the relay reader and runs the
// client reader in this goroutine. The client reader that stops for good
// (after end) finishes the session: it waits for the relay reader and the
// timer callbacks, closes the client connection (end closes the relay
// one) and calls the server's finishSession. Either reader may park while
// idle (park.go); then its goroutine ends early and a later one goes on.
func (s *session) serve() {
	if s.parkable && s.fromRelay.raw != nil {
		_ = s.relay.SetReadDeadline(time.Now().Add(idleAfter))
	}
	s.relayRun.Add(1)
	go s.relayToClient()
	s.clientLoop()
}

// clientLoop runs the client reader until it parks or stops; see serve.
func (s *session) clientLoop() {
	if s.clientToRelay() {
		return // parked
	}
	s.relayRun.Wait()
	s.inflight.Wait()
	if s.park != nil {
		s.park.forget(s)
	}
	_ = s.ws.Close()
	s.inLen, s.out.n, s.raw.n = 0, 0, 0
	s.release(&s.out)
	s.release(&s.raw)
	s.srv.finishSession(s, s.result)
}

// fromTimer runs f for a timer callback unless the session has ended;
// run waits for every such call before returning.
func (s *session) fromTimer(f func()) {
	s.mu.Lock()
	if s.result != nil {
		s.mu.Unlock()
		return
	}
	s.inflight.Add(1)
	s.mu.Unlock()
	defer s.inflight.Done()
	f()
}

// ping sends a ping and sets the next one. While the client reader is
// parked (park.go) it also keeps the silence deadline: it fires at it
// instead of pinging, and wakes the reader, which meets the passed
// deadline (ping timeout).
func (s *session) ping() {
	s.mu.Lock()
	if s.clientParked && !time.Now().Before(s.silenceAt) {
		s.unparkClientLocked()
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	deadline := time.Now().Add(s.srv.cfg.WriteTimeout)
	if err := s.ws.WriteControl(websocket.PingMessage, nil, deadline); err != nil {
		s.end(closeWith(0, contract.ResultClientWriteFailed, err))
		return
	}
	s.mu.Lock()
	if s.result == nil {
		next := s.srv.cfg.PingInterval
		if s.clientParked {
			next = min(next, time.Until(s.silenceAt))
		}
		s.pingAt = time.Now().Add(next)
		s.pinger.Reset(next)
	}
	s.mu.Unlock()
}

// registered stops the register deadline and starts the silence one.
func (s *session) registered() {
	s.mu.Lock()
	s.regTimer.Stop()
	s.mu.Unlock()
	s.srv.peers.registered(s.ticket, &s.id)
	s.refreshReadDeadline()
}

// idleReadSize is the idle wait array of a connection without a file
// descriptor (see pumpIO): it holds a whole small frame.
const idleReadSize = 128

// refreshReadDeadline gives a registered client three ping intervals to
// show a sign of life (any bytes, pongs included). To keep this off the per-message hot
// path, the deadline moves at most every quarter interval and is set a
// quarter interval further: silence closes after 3 to 3.25 intervals.
// After end it does nothing: the close grace holds. Client reader only.
func (s *session) refreshReadDeadline() {
	if !s.filter.registered {
		return
	}
	now := time.Now()
	s.lastRead = now
	ping := s.srv.cfg.PingInterval
	if now.Sub(s.lastRefresh) < ping/4 {
		return
	}
	s.lastRefresh = now
	d := s.silenceLimit()
	if s.parkable && s.fromClient.raw != nil {
		d = min(d, idleAfter) // then clientIdle pushes it on (park.go)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.result == nil {
		_ = s.ws.SetReadDeadline(now.Add(d))
	}
}

func (s *session) ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result != nil
}

// lingerLimit bounds the client bytes read and dropped after the close
// frame: an oversized frame and what follows it, not an endless stream.
const lingerLimit = 256 << 10

// end records the first reason the session ends for and starts the close:
// the relay connection is closed at once; the client gets a close frame
// (when ce.code is set), else its connection is closed too. After a close
// frame the bridge lingers ("lingering close"): it half-closes its side
// (FIN after the close frame) and the client reader keeps draining input
// for closeGrace, until EOF, the client's close or lingerLimit bytes, and
// only then closes the socket. Closing a socket with received bytes
// unread makes the kernel send RST instead of FIN, and a proxy in between
// then drops the close frame it has not yet forwarded. Safe for
// concurrent use; later calls do nothing. It reports whether this call
// ended the session (it was the first).
func (s *session) end(ce *closeError) bool {
	wake, ok := s.stop(ce)
	if !ok {
		return false
	}
	s.closeClient(ce)
	s.inflight.Done() // taken by stop
	if wake {
		go s.clientLoop()
	}
	return true
}

// endBehind is end for a caller that must not wait on this session's
// client: a replacement's reader, whose Register goes to the relay only
// after this session's relay connection is closed, but not after its close
// frame, which a client that stopped reading holds up to the close grace.
// The close frame is written by a goroutine that the session's teardown
// waits for (inflight), as for a timer's.
func (s *session) endBehind(ce *closeError) bool {
	wake, ok := s.stop(ce)
	if !ok {
		return false
	}
	go func() {
		defer s.inflight.Done()
		s.closeClient(ce)
		if wake {
			go s.clientLoop()
		}
	}()
	return true
}

// stop is end's first half: it records ce unless the session has ended
// (ok false), stops the timers, releases a parked relay direction and
// closes the relay connection. wake reports a parked client reader that
// closeClient's caller must start once the close frame is written, so that
// it lingers. It takes one inflight for the caller's closeClient, done
// when that returns: the client reader sees the session ended from here on
// and may stop (a read deadline, EOF), and its teardown closes the client
// connection only after inflight, so never under a close frame being
// written.
func (s *session) stop(ce *closeError) (wake, ok bool) {
	s.mu.Lock()
	if s.result != nil {
		s.mu.Unlock()
		return false, false
	}
	s.result = ce
	s.pinger.Stop()
	s.regTimer.Stop()
	if s.relayParked { // no goroutine reads the relay: the direction is over
		s.relayParked = false
		s.relayRun.Done()
	}
	wake = s.clientParked // a client reader lingers or meets the closed socket
	s.clientParked = false
	s.inflight.Add(1) // before the teardown can wait: the result was unset
	s.mu.Unlock()

	_ = s.relay.Close()
	return wake, true
}

// closeClient is end's second half: the close frame with the close grace
// and the half-close, or, without a code or when the frame cannot be
// written, the client connection closed.
func (s *session) closeClient(ce *closeError) {
	if ce.code != 0 {
		grace := min(s.srv.cfg.WriteTimeout, s.srv.closeGrace)
		msg := websocket.FormatCloseMessage(ce.code, string(ce.reason))
		s.closeErr = s.writeClose(msg, time.Now().Add(grace))
		if s.closeErr == nil {
			s.lingerUntil = time.Now().Add(grace)
			_ = s.ws.SetReadDeadline(s.lingerUntil)
			if cw, ok := s.ws.NetConn().(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite() // TCP and Unix sockets; nothing more is written
			}
			return
		}
	}
	_ = s.ws.Close()
}

// logAttrs are the fields of the session start and end lines. Never the
// whole key, never a token.
func (s *session) logAttrs() []slog.Attr {
	return []slog.Attr{
		slog.String("peer", s.id.Peer),
		slog.String("identity", s.id.Subject),
		slog.String("key", s.id.Key.Fingerprint()),
		slog.String("client_address", s.id.ClientAddress),
		slog.String("remote", s.remote),
		slog.String("request_id", s.id.RequestID),
	}
}
