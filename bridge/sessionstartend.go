package bridge

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/bridge/internal/peerlimit"
	"github.com/wirekube/relay-ws/internal/contract"
)

// A session's start and end on the Server: its place in the session set,
// the revoker and the key owners, the active gauge, the start and end log
// lines.

// serveSession runs an upgraded session; finishSession logs and counts it
// at its end and releases its slot. It runs in the goroutine handleRelay
// starts for the session, which may end before the session does when it
// parks (park.go).
func (s *Server) serveSession(ws *websocket.Conn, relay net.Conn, id peerIdentity, remote string, ticket *peerlimit.Ticket) {
	sess := newSession(s, ws, relay, id, remote)
	sess.ticket = ticket

	s.mu.Lock()
	s.seq++
	sess.seq = s.seq
	s.sessions[sess] = struct{}{}
	draining := s.draining
	s.mu.Unlock()
	s.listing.Add(sess)
	s.metrics.sessionsActive.Inc()
	sess.rev = s.revoker.Add(sess)
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
	s.revoker.Remove(sess.rev)
	s.owners.release(sess)
	var closed contract.Reason // the close of a session that ended without one: none
	if ce != nil {
		closed = ce.reason
	}
	s.peers.ended(sess.ticket, &sess.id, closed)

	s.listing.Remove(sess)
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
	if sess.closeErr != nil { // close_code was decided, but never reached the client
		attrs = append(attrs, slog.String("close_error", sess.closeErr.Error()))
	}
	if ce.code == websocket.ClosePolicyViolation || ce.code == websocket.CloseMessageTooBig {
		level = slog.LevelWarn
	}
	s.log.LogAttrs(context.Background(), level, "session ended", attrs...)
}
