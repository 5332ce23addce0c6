package logging

import (
	"strings"
	"testing"
)

func TestRequestID(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		want   string
	}{
		{"absent", nil, ""},
		{"nginx request_id", []string{"0f6c1d2e3a4b5c6d7e8f90a1b2c3d4e5"}, "0f6c1d2e3a4b5c6d7e8f90a1b2c3d4e5"},
		{"envoy uuid", []string{"f2b6c3f0-0000-4000-8000-000000000001"}, "f2b6c3f0-0000-4000-8000-000000000001"},
		{"dots and underscores", []string{"a.b_c"}, "a.b_c"},
		{"64 characters", []string{strings.Repeat("a", 64)}, strings.Repeat("a", 64)},
		{"65 characters", []string{strings.Repeat("a", 65)}, "[invalid]"},
		{"empty", []string{""}, "[invalid]"},
		{"repeated", []string{"a", "b"}, "[invalid]"},
		{"space", []string{"a b"}, "[invalid]"},
		{"quote", []string{`a"b`}, "[invalid]"},
		{"newline", []string{"a\nb"}, "[invalid]"},
		{"bearer token", []string{"Bearer eyJhbGciOi"}, "[invalid]"},
		{"equals of base64", []string{"abc="}, "[invalid]"},
		{"non-ASCII", []string{"é"}, "[invalid]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RequestID(tc.values); got != tc.want {
				t.Errorf("RequestID(%q) = %q, want %q", tc.values, got, tc.want)
			}
		})
	}
}

// FuzzRequestID: whatever a client sends, the logged value is bounded and
// made only of the allowed characters.
func FuzzRequestID(f *testing.F) {
	for _, s := range []string{"", "0f6c1d2e3a4b5c6d7e8f90a1b2c3d4e5", "a b", "a\nb", strings.Repeat("a", 65), "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := RequestID([]string{v})
		if got == RequestIDInvalid {
			return
		}
		if got != v || len(got) == 0 || len(got) > MaxRequestID {
			t.Fatalf("RequestID(%q) = %q", v, got)
		}
		if strings.Trim(got, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != "" {
			t.Fatalf("RequestID(%q) = %q: a character outside the set", v, got)
		}
	})
}
