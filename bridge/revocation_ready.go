package bridge

import (
	"log/slog"
	"net/http"
)

// vouching reports whether the bridge can vouch for a new session: the
// revocation stream is in sync, or was in sync once and has been out of
// sync for less than --revocation-unready-after. Before the first sync it
// cannot. With revocation off it always can (token expiry only).
func (r *revoker) vouching() bool {
	if !r.enabled() {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inSync || (r.synced && r.now().Sub(r.downSince) < r.unready)
}

// logFailure logs why a stream that never got in sync failed, once per
// distinct error (a missing socket or secret file would otherwise retry
// silently while /readyz fails).
func (r *revoker) logFailure(err error) {
	msg := errString(err)
	r.mu.Lock()
	repeat := msg == r.lastFailure
	r.lastFailure = msg
	r.mu.Unlock()
	if msg != "" && !repeat {
		r.log.Warn("revocation stream not in sync: not ready, upgrades refused (revocation_unavailable)",
			slog.String("error", msg), slog.String("addr", r.addr))
	}
}

// revocationUnready answers /readyz 503 while the bridge cannot vouch
// (vouching), so that the Service sends agents to another replica. It
// reports whether it answered.
func (s *Server) revocationUnready(w http.ResponseWriter) bool {
	if s.revoker.vouching() {
		return false
	}
	http.Error(w, "revocation stream out of sync (docs/revocation.md)", http.StatusServiceUnavailable)
	return true
}
