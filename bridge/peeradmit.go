package bridge

import (
	"log/slog"
	"math"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/bridge/internal/peerlimit"
	"github.com/wirekube/relay-ws/internal/contract"
)

// peerAdmission is the Server's side of the per-peer limits and the
// key-mismatch backoff (internal/peerlimit): their answers turned into
// HTTP (Retry-After), the strike counter and its log line. It reads
// nothing of the Server; New gives it every part.
type peerAdmission struct {
	limits  *peerlimit.Limits
	backoff *peerlimit.Backoff
	strikes prometheus.Counter // wirekube_bridge_key_mismatch_strikes_total
	log     *slog.Logger
}

// admit runs the per-identity checks before the relay dial: the
// key-mismatch backoff (403 register_key_mismatch with Retry-After) and
// the per-peer limits (429 with Retry-After). The ticket must be released
// when the request or its session ends.
func (a *peerAdmission) admit(w http.ResponseWriter, id peerIdentity, probe bool) (*peerlimit.Ticket, contract.Reason) {
	if left, refused := a.backoff.Refused(id.backoffID()); refused {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(left.Seconds()))))
		return nil, contract.CloseRegisterKeyMismatch
	}
	acquire := a.limits.Acquire
	if probe {
		acquire = a.limits.AcquireProbe // apart from the sessions (internal/peerlimit/probe.go)
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

// registered runs once a session's Register is verified: the session
// leaves the peer's unregistered bound and its key-mismatch strikes are
// forgotten.
func (a *peerAdmission) registered(t *peerlimit.Ticket, id *peerIdentity) {
	if t != nil {
		t.MarkRegistered()
	}
	a.backoff.Reset(id.backoffID())
}

// ended releases the peer's share when a session ends and counts a close
// with register_key_mismatch towards the identity's backoff window.
func (a *peerAdmission) ended(t *peerlimit.Ticket, id *peerIdentity, closed contract.Reason) {
	if t != nil {
		t.Release()
	}
	if closed == contract.CloseRegisterKeyMismatch {
		window := a.backoff.Strike(id.backoffID())
		a.strikes.Inc()
		a.log.Warn("key mismatch: upgrades of this identity are refused for a while",
			"peer", id.Peer, "identity", id.Subject, "window", window.String())
	}
}
