package failurelimit

import (
	"strings"
	"testing"
)

// TestFailureLimitOptionsValidate: each invalid value is named by its flag.
func TestFailureLimitOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string // "" : valid
	}{
		{"defaults", DefaultOptions(), ""},
		{"off ignores the rest", Options{}, ""},
		{"negative burst", Options{SourceFailureBurst: -1}, "--source-failure-burst"},
		{"no rate", Options{SourceFailureBurst: 1, SourceFailureAddresses: 1}, "--source-failure-rate"},
		{"no addresses", Options{SourceFailureBurst: 1, SourceFailureRate: 1}, "--source-failure-addresses"},
	} {
		err := tc.o.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}
