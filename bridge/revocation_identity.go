package bridge

import (
	"fmt"
	"net/http"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
)

// parseBinding reads X-WireKube-Binding into id.Binding. With the
// revocation stream on it is required (without it no revocation could
// reach the session: fail closed); whenever present it must parse and name
// the same identity, peer and key as the other identity headers.
func parseBinding(h http.Header, id *peerIdentity, required bool) error {
	v := h.Values(contract.HeaderBinding)
	switch {
	case len(v) == 0 && !required:
		return nil
	case len(v) == 0:
		return fmt.Errorf("%w: %s missing (the proxy must forward it; see docs/revocation.md)", ErrIdentityHeader, contract.HeaderBinding)
	case len(v) > 1:
		return fmt.Errorf("%w: %s repeated", ErrIdentityHeader, contract.HeaderBinding)
	}
	b, err := revocation.ParseBinding(v[0])
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrIdentityHeader, contract.HeaderBinding, err)
	}
	if b.Identity != id.Subject || b.Peer != id.Peer || b.KeySHA256 != revocation.KeyHash(id.Key[:]) {
		return fmt.Errorf("%w: %s names another identity, peer or key", ErrIdentityHeader, contract.HeaderBinding)
	}
	id.Binding = v[0]
	return nil
}
