package meshwatch

import (
	"strings"
	"testing"
)

// TestExpectedRelayURLFlag: only a wss:// URL with a host and without user,
// query or fragment is accepted; every refusal names the flag.
func TestExpectedRelayURLFlag(t *testing.T) {
	for _, tc := range []struct {
		v  string
		ok bool
	}{
		{"", true},
		{"wss://relay.corp.test/relay", true},
		{"WSS://relay.corp.test:8443", true},
		{"ws://relay.corp.test/relay", false},
		{"https://relay.corp.test/relay", false},
		{"relay.corp.test/relay", false},
		{"wss:///relay", false},
		{"wss://user@relay.corp.test/relay", false},
		{"wss://relay.corp.test/relay?x=1", false},
		{"wss://relay.corp.test/relay?", false},
		{"wss://relay.corp.test/relay#x", false},
	} {
		t.Run(tc.v, func(t *testing.T) {
			o := DefaultOptions()
			o.ExpectedRelayURL = tc.v
			err := o.Validate()
			if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "--expected-relay-url")) {
				t.Errorf("Validate = %v, want ok %v (an error naming --expected-relay-url)", err, tc.ok)
			}
		})
	}
}
