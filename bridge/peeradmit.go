package bridge

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// admitPeer runs the per-identity checks before the relay dial: the
// key-mismatch backoff (403 register_key_mismatch with Retry-After) and
// the per-peer limits (429 with Retry-After). The ticket must be released
// when the request or its session ends.
func (s *Server) admitPeer(w http.ResponseWriter, id peerIdentity) (*peerTicket, contract.Reason) {
	if left, refused := s.backoff.refused(id); refused {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(left.Seconds()))))
		return nil, contract.CloseRegisterKeyMismatch
	}
	t, reason := s.peers.acquire(id.Peer)
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

// validateRecovery checks the flags of the hold, the per-peer limits and
// the key-mismatch backoff.
func (o *Options) validateRecovery() []error {
	var errs []error
	if o.RelayWait < 0 || o.RelayWait >= 10*time.Second {
		errs = append(errs, fmt.Errorf("--relay-wait: want 0 to under the agent's 10s handshake timeout, got %s", o.RelayWait))
	}
	if o.RelayWaitMax < 1 {
		errs = append(errs, fmt.Errorf("--relay-wait-max: must be at least 1, got %d", o.RelayWaitMax))
	}
	if o.MaxSessionsPerPeer < 1 {
		errs = append(errs, fmt.Errorf("--max-sessions-per-peer: must be at least 1, got %d", o.MaxSessionsPerPeer))
	}
	if o.MaxUnregisteredPerPeer < 1 || o.MaxUnregisteredPerPeer > o.MaxSessionsPerPeer {
		errs = append(errs, fmt.Errorf("--max-unregistered-per-peer: want 1 to --max-sessions-per-peer (%d), got %d",
			o.MaxSessionsPerPeer, o.MaxUnregisteredPerPeer))
	}
	if o.KeyMismatchBackoffMax < time.Second {
		errs = append(errs, fmt.Errorf("--key-mismatch-backoff-max: must be at least 1s, got %s", o.KeyMismatchBackoffMax))
	}
	return errs
}
