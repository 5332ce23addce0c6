package bridge

import (
	"math"
	"net/http"
	"strconv"

	"github.com/wirekube/relay-ws/bridge/internal/peerlimit"
	"github.com/wirekube/relay-ws/internal/contract"
)

// admitPeer runs the per-identity checks before the relay dial: the
// key-mismatch backoff (403 register_key_mismatch with Retry-After) and
// the per-peer limits (429 with Retry-After), both kept by
// internal/peerlimit. The ticket must be released when the request or its
// session ends.
func (s *Server) admitPeer(w http.ResponseWriter, id peerIdentity, probe bool) (*peerlimit.Ticket, contract.Reason) {
	if left, refused := s.backoff.Refused(id.backoffID()); refused {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(left.Seconds()))))
		return nil, contract.CloseRegisterKeyMismatch
	}
	acquire := s.peers.Acquire
	if probe {
		acquire = s.peers.AcquireProbe // apart from the sessions (internal/peerlimit/probe.go)
	}
	t, reason := acquire(id.Peer)
	if reason != "" {
		w.Header().Set("Retry-After", "1")
	}
	return t, reason
}

// backoffID is what the key-mismatch backoff is kept for.
func (id *peerIdentity) backoffID() peerlimit.Identity {
	return peerlimit.Identity{Subject: id.Subject, Peer: id.Peer, Key: id.Key}
}

// onRegistered runs once a session's Register is verified: the session
// leaves the peer's unregistered bound and its key-mismatch strikes are
// forgotten.
func (s *Server) onRegistered(sess *session) {
	if sess.ticket != nil {
		sess.ticket.MarkRegistered()
	}
	s.backoff.Reset(sess.id.backoffID())
}

// onSessionEnd releases the peer's share and counts a key mismatch
// towards the identity's backoff window.
func (s *Server) onSessionEnd(sess *session, ce *closeError) {
	if sess.ticket != nil {
		sess.ticket.Release()
	}
	if ce != nil && ce.reason == contract.CloseRegisterKeyMismatch {
		window := s.backoff.Strike(sess.id.backoffID())
		s.metrics.keyBackoffStrikes.Inc()
		s.log.Warn("key mismatch: upgrades of this identity are refused for a while",
			"peer", sess.id.Peer, "identity", sess.id.Subject, "window", window.String())
	}
}
