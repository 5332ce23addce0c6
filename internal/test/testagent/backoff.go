package testagent

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// IsGatewayBackoff reports a refusal that only asks the client to come back
// later for this identity: 429 (the bridge's per-peer limits, while an
// earlier session of the peer is still being torn down) or 403
// register_key_mismatch (the key-mismatch backoff window after a wrong
// Register) or key_held_by_other_binding (a session of another binding of
// the peer has not ended yet, or its end has not reached extauthz).
func IsGatewayBackoff(err error) bool {
	var de *DialError
	if !errors.As(err, &de) {
		return false
	}
	return de.Status == http.StatusTooManyRequests ||
		(de.Status == http.StatusForbidden && (de.Reason == string(contract.CloseRegisterKeyMismatch) ||
			de.Reason == string(contract.ReasonKeyHeldByOtherBinding)))
}

// RetryBackoff calls dial until it succeeds, fails otherwise than with
// IsGatewayBackoff, or within has passed, waiting 100 ms between tries.
// Tests and the demo use it where a scenario reconnects an identity right
// after a session of it ended or mismatched on purpose.
func RetryBackoff[T any](ctx context.Context, within time.Duration, dial func() (T, error)) (T, error) {
	deadline := time.Now().Add(within)
	for {
		v, err := dial()
		if err == nil || !IsGatewayBackoff(err) || time.Now().After(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
