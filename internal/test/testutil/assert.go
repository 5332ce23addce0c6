package testutil

import (
	"strings"
	"testing"
)

// Contains reports every sub that s lacks, and shows s once.
func Contains(t testing.TB, s string, subs ...string) {
	t.Helper()
	var missing []string
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			missing = append(missing, sub)
		}
	}
	if len(missing) > 0 {
		t.Errorf("output lacks %q:\n%s", missing, s)
	}
}
