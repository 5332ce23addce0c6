package revocationhub

import (
	"strings"
	"testing"
)

// TestRevocationOptionsValidate: the revocation listener is a Unix socket or
// loopback only, and every bad value names its flag.
func TestRevocationOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		flag string
		mod  func(*Options)
	}{
		{"--revocation-listen", func(o *Options) { o.RevocationListen = ":9004" }},
		{"--revocation-listen", func(o *Options) { o.RevocationListen = "0.0.0.0:9004" }},
		{"--revocation-listen", func(o *Options) { o.RevocationListen = "10.0.0.7:9004" }},
		{"--revocation-listen", func(o *Options) { o.RevocationListen = "unix:" }},
		{"--revocation-secret-file", func(o *Options) { o.RevocationSecretFile = "" }},
		{"--revocation-max-streams", func(o *Options) { o.RevocationMaxStreams = 0 }},
		{"--revocation-max-bindings", func(o *Options) { o.RevocationMaxBindings = 0 }},
	} {
		o := DefaultOptions()
		tc.mod(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%s: Validate() = %v, want an error naming the flag", tc.flag, err)
		}
	}
	for _, ok := range []string{"", "unix:/run/x.sock", "127.0.0.1:9004", "[::1]:9004", "localhost:9004"} {
		o := DefaultOptions()
		o.RevocationListen = ok
		if err := o.Validate(); err != nil {
			t.Errorf("--revocation-listen=%q: %v", ok, err)
		}
	}
}
