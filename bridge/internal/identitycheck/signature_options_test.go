package identitycheck

import (
	"strings"
	"testing"
	"time"
)

// TestSignatureOptionsValidate: each bad value names its flag.
func TestSignatureOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*SignatureOptions)
		flag string
	}{
		{func(o *SignatureOptions) { o.IdentitySignatureMaxAge = 0 }, "--identity-signature-max-age"},
		{func(o *SignatureOptions) { o.IdentitySignatureMaxAge = 6 * time.Minute }, "--identity-signature-max-age"},
		{func(o *SignatureOptions) { o.IdentityReplayCacheSize = 0 }, "--identity-replay-cache-size"},
		{func(o *SignatureOptions) { o.IdentityReplayPeerShare = 0 }, "--identity-replay-peer-share"},
		{func(o *SignatureOptions) { o.IdentityReplayPeerShare = 65537 }, "--identity-replay-peer-share"},
	} {
		o := DefaultSignatureOptions()
		tc.mod(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("Validate = %v, want an error naming %s", err, tc.flag)
		}
	}
}
