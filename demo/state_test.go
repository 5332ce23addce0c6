package demo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string // substring of the error; "" = valid
	}{
		{"defaults", DefaultOptions(), ""},
		{"zero means default", Options{}, ""},
		{"negative traffic", Options{TrafficDuration: -time.Second}, "--traffic-duration"},
		{"traffic over a minute", Options{TrafficDuration: 61 * time.Second}, "--traffic-duration"},
		{"too many round trips", Options{RoundTrips: 100001}, "--round-trips"},
		{"bad log level", Options{LogLevel: "loud"}, "--log-level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Validate()
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestOptionsComplete(t *testing.T) {
	c, err := Options{RepoRoot: "/repo"}.Complete()
	if err != nil {
		t.Fatal(err)
	}
	o := c.Options
	if o.StateDir != "/repo/.demo" || o.TrafficDuration != 3*time.Second || o.RoundTrips != 200 || o.Progress == nil {
		t.Fatalf("Complete() = %+v", o)
	}
}

func TestStateDirLockAndReset(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	st, err := openStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.writeFile("logs/old.log", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openStateDir(dir); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open while locked: %v, want an in-use error", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "logs", "old.log")); err != nil {
		t.Fatalf("a refused open must not wipe the live run's files: %v", err)
	}
	st.close()
	st2, err := openStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.close()
	if _, err := os.Stat(filepath.Join(dir, "logs")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("previous run's files still there: %v", err)
	}
}

// TestNginxInstaller: a missing nginx is installed through .ci/apt-install
// (which keeps the service from starting), only when allowed and as root.
func TestNginxInstaller(t *testing.T) {
	const script = "/repo/.ci/apt-install"
	tests := []struct {
		name      string
		have      []bool // answers of successive have() calls
		allowed   bool
		root      bool
		fail      bool // the install fails
		wantErr   string
		wantCalls []string
	}{
		{name: "present", have: []bool{true}, allowed: true, root: true},
		{name: "missing, not allowed", have: []bool{false}, wantErr: "--install-nginx=false", root: true},
		{name: "missing, not root", have: []bool{false}, allowed: true, wantErr: "sudo apt-get install"},
		{name: "installed", have: []bool{false, true}, allowed: true, root: true,
			wantCalls: []string{script + " nginx"}},
		{name: "install fails", have: []bool{false}, allowed: true, root: true, fail: true,
			wantErr: "install nginx: E: Unable to locate package nginx", wantCalls: []string{script + " nginx"}},
		{name: "installed, still no nginx", have: []bool{false, false}, allowed: true, root: true,
			wantErr: "no nginx binary", wantCalls: []string{script + " nginx"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			haves := tt.have
			n := nginxInstaller{
				allowed: tt.allowed, isRoot: tt.root, out: &strings.Builder{}, script: script,
				have: func() bool { h := haves[0]; haves = haves[1:]; return h },
				run: func(_ context.Context, _ []string, name string, args ...string) error {
					calls = append(calls, name+" "+strings.Join(args, " "))
					if tt.fail {
						return errors.New("E: Unable to locate package nginx")
					}
					return nil
				},
			}
			err := n.ensure(context.Background())
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("ensure() = %v, want %q", err, tt.wantErr)
			}
			if strings.Join(calls, "|") != strings.Join(tt.wantCalls, "|") {
				t.Errorf("commands %q, want %q", calls, tt.wantCalls)
			}
		})
	}
}

func TestPrefixWriter(t *testing.T) {
	var b strings.Builder
	w := prefixWriter{&b}
	n, err := w.Write([]byte("harness: one\ntwo\n"))
	if err != nil || n != len("harness: one\ntwo\n") {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if b.String() != "    harness: one\n    two\n" {
		t.Fatalf("got %q", b.String())
	}
}

func TestWriteUpInstructions(t *testing.T) {
	rep := passingReport()
	rep.Where.KeyFiles = []string{"/s/keys/node-a.key"}
	rep.Where.HTTPSBase = "https://127.0.0.1:8443"
	var b strings.Builder
	if err := WriteUpInstructions(&b, rep, "bin/wirekube-relay-probe"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"bin/wirekube-relay-probe --url wss://127.0.0.1:8443/relay",
		"--token-file /s/tokens/node-a --ca-file /s/ca.crt",
		"--public-key $(cat /s/keys/node-a.pub)",
		"--private-key-file /s/keys/node-a.key",
		"KUBECONFIG=/s/kubeconfig kubectl get wkpeer",
		"curl --cacert /s/ca.crt https://127.0.0.1:8443/healthz",
		"http://127.0.0.1:9103/metrics",
		"Ctrl-C",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("instructions lack %q:\n%s", want, b.String())
		}
	}
}

func TestParentOf(t *testing.T) {
	tests := map[string]int{
		"123 (nginx) S 77 123 123 0":             77,
		"9 (a (weird) name) R 1 9 9":             1,
		"5 (x)":                                  -1,
		"garbage":                                -1,
		"42 (kube-apiserver) S notanumber 1 2 3": -1,
	}
	for stat, want := range tests {
		if got := parentOf([]byte(stat)); got != want {
			t.Errorf("parentOf(%q) = %d, want %d", stat, got, want)
		}
	}
	kids, err := childProcesses(os.Getpid())
	if err != nil || len(kids) != 0 {
		t.Errorf("childProcesses(self) = %v, %v; want none", kids, err)
	}
}
