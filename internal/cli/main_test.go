package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
)

func TestExitCode(t *testing.T) {
	errUsage := errors.New("usage")
	usage2 := func(err error) int {
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	tests := []struct {
		name   string
		err    error
		code   func(error) int
		want   int
		stderr string
	}{
		{"nil", nil, nil, 0, ""},
		{"help", flag.ErrHelp, usage2, 0, ""},
		{"wrapped help", fmt.Errorf("parse: %w", flag.ErrHelp), nil, 0, ""},
		{"error, no code func", errors.New("boom"), nil, 1, "wirekube-x: boom\n"},
		{"error mapped by code", fmt.Errorf("--count: %w", errUsage), usage2, 2, "wirekube-x: --count: usage\n"},
	}
	for _, tt := range tests {
		var stderr strings.Builder
		if got := exitCode("wirekube-x", tt.err, tt.code, &stderr); got != tt.want || stderr.String() != tt.stderr {
			t.Errorf("%s: exit %d, stderr %q; want %d, %q", tt.name, got, stderr.String(), tt.want, tt.stderr)
		}
	}
}
