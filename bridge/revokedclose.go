package bridge

import (
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/bridge/internal/revocationclient"
	"github.com/wirekube/relay-ws/internal/contract"
)

// A session as the revocation client watches it (revocationclient.Session):
// its binding, admission and token expiry, and how it closes when its
// authorization ends.

// Binding is the session's X-WireKube-Binding.
func (s *session) Binding() string { return s.id.Binding }

// Admitted is when the session was admitted.
func (s *session) Admitted() time.Time { return s.start }

// TokenExpires is the exp of the session's token.
func (s *session) TokenExpires() time.Time { return s.id.TokenExpires }

// CloseFor ends the session with the 1008 close of cause: token_expired
// (from the expiry timer, through fromTimer like every timer of the
// session), revocation_stale, or extauthz's reason (revokedClose). It
// reports whether this call ended it.
func (s *session) CloseFor(cause string, reason contract.Reason) bool {
	switch cause {
	case revocationclient.CauseTokenExpired:
		ended := false
		s.fromTimer(func() {
			ended = s.end(closeWith(websocket.ClosePolicyViolation, contract.CloseTokenExpired, nil))
		})
		return ended
	case revocationclient.CauseRevocationStale:
		return s.end(closeWith(websocket.ClosePolicyViolation, contract.CloseRevocationStale, nil))
	}
	return s.end(revokedClose(reason))
}

// revokedClose is the 1008 close of a session extauthz revoked: with the
// reason extauthz gave when it is one this bridge knows, else
// authorization_revoked. One closeWith per reason, so that docs/spec.md's
// test sees each.
func revokedClose(r contract.Reason) *closeError {
	switch r {
	case contract.ReasonPodNotFound:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPodNotFound, nil)
	case contract.ReasonPodUIDMismatch:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPodUIDMismatch, nil)
	case contract.ReasonPodServiceAccountMismatch:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPodServiceAccountMismatch, nil)
	case contract.ReasonPodNotScheduled:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPodNotScheduled, nil)
	case contract.ReasonPodTerminated:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPodTerminated, nil)
	case contract.ReasonNodeMismatch:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonNodeMismatch, nil)
	case contract.ReasonServiceAccountNotFound:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonServiceAccountNotFound, nil)
	case contract.ReasonIdentityNotAllowed:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonIdentityNotAllowed, nil)
	case contract.ReasonTokenNotBound:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonTokenNotBound, nil)
	case contract.ReasonPeerNotFound:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPeerNotFound, nil)
	case contract.ReasonPeerKeyInvalid:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPeerKeyInvalid, nil)
	case contract.ClosePeerKeyChanged:
		return closeWith(websocket.ClosePolicyViolation, contract.ClosePeerKeyChanged, nil)
	case contract.ReasonPeerKeyDuplicate:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPeerKeyDuplicate, nil)
	case contract.ReasonPeerKeyMoved:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPeerKeyMoved, nil)
	case contract.CloseRevocationLimit:
		return closeWith(websocket.ClosePolicyViolation, contract.CloseRevocationLimit, nil)
	}
	return closeWith(websocket.ClosePolicyViolation, contract.CloseRevoked, fmt.Errorf("extauthz reason %q", r))
}
