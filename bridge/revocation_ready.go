package bridge

import (
	"net/http"
)

// revocationUnready answers /readyz 503 while the bridge cannot vouch
// (revocationclient's Client.Vouching), so that the Service sends agents to
// another replica. It reports whether it answered.
func (s *Server) revocationUnready(w http.ResponseWriter) bool {
	if s.revoker.Vouching() {
		return false
	}
	http.Error(w, "revocation stream out of sync (docs/revocation.md)", http.StatusServiceUnavailable)
	return true
}
