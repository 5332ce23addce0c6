package extauthz

import (
	"context"

	"github.com/wirekube/relay-ws/extauthz/internal/tokenreview"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenverify"
	"github.com/wirekube/relay-ws/internal/contract"
)

// tokenVerifier is what the decision asks of the token verifier
// (extauthz/internal/tokenverify): a full local verification, and whether a
// cached one still holds. Safe for concurrent use.
type tokenVerifier interface {
	Verify(ctx context.Context, token string) (*tokenverify.Verified, contract.Reason, string)
	Holds(ver *tokenverify.Verified) bool
}

// verifyAgain verifies token in full: it has no cached verification that
// still holds (Holds). A cached answer (inCache) whose verification no
// longer holds and whose token fails again is dropped from the cache, so it
// can never be served.
func (a *Authorizer) verifyAgain(ctx context.Context, k tokenreview.Key, token string, inCache bool) (*tokenverify.Verified, contract.Reason, string) {
	ver, reason, detail := a.verifier.Verify(ctx, token)
	if reason != "" && inCache {
		a.reviewer.Forget(k)
	}
	return ver, reason, detail
}
