package bridge

import (
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
)

// TestRevokedCloseReasons: a session extauthz revokes closes with 1008 and
// the very reason extauthz gave, for every reason docs/spec.md#close-reasons
// lists for a revocation (written out here as the client reads them); any
// other reason closes with authorization_revoked, never with a reason the
// client would act on wrongly.
func TestRevokedCloseReasons(t *testing.T) {
	for _, reason := range []string{
		"pod_not_found", "pod_uid_mismatch", "pod_service_account_mismatch", "pod_not_scheduled",
		"node_mismatch", "service_account_not_found", "identity_not_allowed", "token_not_bound",
		"peer_not_found", "peer_key_invalid", "peer_key_duplicate", "peer_key_changed", "revocation_limit",
	} {
		ce := revokedClose(contract.Reason(reason))
		if ce.code != 1008 || string(ce.reason) != reason {
			t.Errorf("revoked with %s: close %d %s, want 1008 %s", reason, ce.code, ce.reason, reason)
		}
	}
	for _, reason := range []string{"", "some_future_reason", "token_expired", "session_replaced", "probe_ok"} {
		ce := revokedClose(contract.Reason(reason))
		if ce.code != 1008 || ce.reason != "authorization_revoked" {
			t.Errorf("revoked with %q: close %d %s, want 1008 authorization_revoked", reason, ce.code, ce.reason)
		}
	}
}
