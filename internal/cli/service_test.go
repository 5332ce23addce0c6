package cli

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// serviceOptions is a service's Options in miniature.
type serviceOptions struct{ wait time.Duration }

func (o *serviceOptions) AddFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.wait, "wait", o.wait, "a duration")
}

func TestParseService(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantDone   bool
		wantErr    string // substring; empty: no error
		wantStdout string // prefix
		wantWait   time.Duration
	}{
		{name: "flags", args: []string{"--wait=3s"}, wantWait: 3 * time.Second},
		{name: "version", args: []string{"--version"}, wantDone: true, wantStdout: "wirekube-x "},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "nope"},
		{name: "argument", args: []string{"extra"}, wantErr: "extra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := serviceOptions{wait: time.Second}
			var stdout, stderr strings.Builder
			done, err := ParseService("wirekube-x", &o, tt.args, &stdout, &stderr)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			}
			if done != tt.wantDone || !strings.HasPrefix(stdout.String(), tt.wantStdout) ||
				(tt.wantStdout == "" && stdout.Len() > 0) {
				t.Errorf("done %v stdout %q, want %v and %q", done, stdout.String(), tt.wantDone, tt.wantStdout)
			}
			if tt.wantErr == "" && !tt.wantDone && o.wait != tt.wantWait {
				t.Errorf("--wait parsed as %s, want %s", o.wait, tt.wantWait)
			}
		})
	}
}

// TestStartService: the start line names the service and its version, and
// the registry holds the Go, process and build-info metrics.
func TestStartService(t *testing.T) {
	var stderr strings.Builder
	logger, reg, err := StartService("wirekube-x", &stderr, "text", "info")
	if err != nil || logger == nil {
		t.Fatalf("StartService: %v", err)
	}
	if !strings.Contains(stderr.String(), "msg=\"wirekube-x starting\" version=") {
		t.Errorf("start line %q", stderr.String())
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "wirekube_build_info"} {
		if !have[name] {
			t.Errorf("registry has no %s", name)
		}
	}
	if _, _, err := StartService("wirekube-x", &stderr, "yaml", "info"); err == nil {
		t.Error("StartService accepted --log-format=yaml")
	}
}
