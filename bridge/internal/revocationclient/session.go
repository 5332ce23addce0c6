package revocationclient

import (
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// Session is a live session as the client watches it; the bridge's
// session satisfies it. Its methods are safe for concurrent use.
type Session interface {
	// Binding is the session's X-WireKube-Binding, sent to extauthz.
	Binding() string
	// Admitted is when the session was admitted: a stream that is out of
	// sync has vouched for it since then at most.
	Admitted() time.Time
	// TokenExpires is its token's exp (X-WireKube-Token-Expires).
	TokenExpires() time.Time
	// CloseFor ends the session because its authorization ended for
	// cause; reason is extauthz's for CauseRevoked, else empty. It reports
	// whether this call ended it (false: it had ended already). The bridge
	// picks the close code and reason.
	CloseFor(cause string, reason contract.Reason) bool
}

// Causes of wirekube_bridge_authorization_closes_total, each a way a
// session's authorization ends.
const (
	CauseTokenExpired    = "token_expired"
	CauseRevoked         = "revoked"
	CauseRevocationStale = "revocation_stale"
)
