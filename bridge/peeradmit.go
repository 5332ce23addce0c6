package bridge

import (
	"math"
	"net/http"
	"strconv"

	"github.com/wirekube/relay-ws/internal/contract"
)

// admitPeer runs the per-identity checks before the relay dial: the
// key-mismatch backoff (403 register_key_mismatch with Retry-After) and
// the per-peer limits (429 with Retry-After). The ticket must be released
// when the request or its session ends.
func (s *Server) admitPeer(w http.ResponseWriter, id peerIdentity, probe bool) (*peerTicket, contract.Reason) {
	if left, refused := s.backoff.refused(id); refused {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(left.Seconds()))))
		return nil, contract.CloseRegisterKeyMismatch
	}
	acquire := s.peers.acquire
	if probe {
		acquire = s.peers.acquireProbe // apart from the sessions (probelimit.go)
	}
	t, reason := acquire(id.Peer)
	if reason != "" {
		w.Header().Set("Retry-After", "1")
	}
	return t, reason
}

// onRegistered runs once a session's Register is verified: the session
// leaves the peer's unregistered bound and its key-mismatch strikes are
// forgotten.
func (s *Server) onRegistered(sess *session) {
	if sess.ticket != nil {
		sess.ticket.markRegistered()
	}
	s.backoff.reset(sess.id)
}

// onSessionEnd releases the peer's share and counts a key mismatch
// towards the identity's backoff window.
func (s *Server) onSessionEnd(sess *session, ce *closeError) {
	if sess.ticket != nil {
		sess.ticket.release()
	}
	if ce != nil && ce.reason == contract.CloseRegisterKeyMismatch {
		window := s.backoff.strike(sess.id)
		s.metrics.keyBackoffStrikes.Inc()
		s.log.Warn("key mismatch: upgrades of this identity are refused for a while",
			"peer", sess.id.Peer, "identity", sess.id.Subject, "window", window.String())
	}
}
