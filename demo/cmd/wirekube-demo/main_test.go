package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunRefusesBadInvocations: every case fails before anything starts
// (no state dir is touched, no process is started).
func TestRunRefusesBadInvocations(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr error
		want    string // substring of the error or the output
	}{
		{"help", []string{"-h"}, flag.ErrHelp, "-traffic-duration"},
		{"unknown flag", []string{"--nope"}, errUsage, "flag provided but not defined"},
		{"extra argument", []string{"now"}, errUsage, `unexpected arguments ["now"]`},
		{"traffic too long", []string{"--traffic-duration=2m", "--state-dir=" + t.TempDir()}, errUsage, "--traffic-duration 2m0s"},
		{"negative round trips", []string{"--round-trips=-1", "--state-dir=" + t.TempDir()}, errUsage, "--round-trips -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			err := run(context.Background(), tt.args, &out, io.Discard)
			if err == nil {
				t.Fatal("run succeeded")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
			if strings.Contains(out.String(), "Result:") {
				t.Errorf("a report was printed for a bad invocation:\n%s", out.String())
			}
			if !strings.Contains(err.Error()+out.String(), tt.want) {
				t.Errorf("error %q and output %q lack %q", err, out.String(), tt.want)
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"--version"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "wirekube-demo dev (go") {
		t.Fatalf("out %q", out.String())
	}
}
