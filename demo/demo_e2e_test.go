//go:build e2e

package demo

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testagent"
	"github.com/wirekube/relay-ws/relayproto"
)

// These tests run the demo in-process against a real etcd, kube-apiserver,
// nginx (or Envoy) and the repository's binaries, as `make demo` does. They
// need the kube binaries (built on first use into e2e/.cache/kube).

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testOptions(t *testing.T) Options {
	o := DefaultOptions()
	o.StateDir = filepath.Join(t.TempDir(), "state")
	o.TrafficDuration = 2 * time.Second
	o.RoundTrips = 100
	o.Progress = testWriter{t}
	// With prebuilt binaries (make build) the run also includes the probe
	// step; without, the harness builds the three it needs.
	o.BinDir = os.Getenv(stack.EnvBinDir)
	return o
}

func TestDemoRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	o := testOptions(t)
	start := time.Now()
	rep, err := Run(ctx, mustComplete(t, o))
	var text strings.Builder
	rep.WriteText(&text)
	t.Logf("demo took %s; report:\n%s", time.Since(start).Round(time.Millisecond), text.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !rep.OK() || !strings.Contains(text.String(), "Result: ✓ every step behaved") {
		t.Fatal("the report does not say every step passed")
	}
	for _, s := range rep.Steps {
		if !s.OK {
			t.Errorf("step %q failed: %s", s.Name, s.Detail)
		}
	}
	if len(rep.Attacks) != len(Attacks()) {
		t.Errorf("%d attacks ran, want %d", len(rep.Attacks), len(Attacks()))
	}
	if tr := rep.Traffic; tr == nil || tr.FramesAB == 0 || tr.FramesBA == 0 || tr.RTTs != o.RoundTrips {
		t.Errorf("traffic %+v, want frames both ways and %d round trips", tr, o.RoundTrips)
	}
	assertNothingLeft(t, o.StateDir)
	assertNoTokenInLogs(t, rep.Where)
}

// TestDemoUp: the stack stays up until the context ends; while it runs,
// node-a's agent connects with the files the instructions name; then
// everything stops.
func TestDemoUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	o := testOptions(t)
	var connectErr error
	_, err := Up(ctx, mustComplete(t, o), func(rep *Report) {
		defer cancel() // as Ctrl-C would
		var b strings.Builder
		WriteUpInstructions(&b, rep, "bin/wirekube-relay-probe")
		t.Log(b.String())
		connectErr = connectWithFiles(ctx, rep.Where)
	})
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if connectErr != nil {
		t.Fatalf("connecting with the printed files: %v", connectErr)
	}
	assertNothingLeft(t, o.StateDir)
}

// connectWithFiles dials as node-a using only the state dir's files.
func connectWithFiles(ctx context.Context, w Where) error {
	caPEM, err := os.ReadFile(w.CAFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("no certificate in " + w.CAFile)
	}
	tlsConf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	pub, err := os.ReadFile(strings.TrimSuffix(w.KeyFiles[0], ".key") + ".pub")
	if err != nil {
		return err
	}
	key, err := relayproto.ParseKey(strings.TrimSpace(string(pub)))
	if err != nil {
		return err
	}
	c, err := testagent.Dial(ctx, testagent.Options{URL: w.URL, TokenFile: w.TokenFiles[0], TLS: tlsConf}, key)
	if err != nil {
		return err
	}
	defer c.Close()
	return echo(c, key)
}

// assertNothingLeft: no child of this process is alive, and no process
// anywhere runs with the state dir in its command line.
func assertNothingLeft(t *testing.T, stateDir string) {
	t.Helper()
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cmd := string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		if parentOf(stat) == self {
			t.Errorf("child process %d still running: %s", pid, cmd)
		}
		if strings.Contains(cmd, stateDir) {
			t.Errorf("process %d still running with the state dir: %s", pid, cmd)
		}
	}
}

// assertNoTokenInLogs: none of the demo's tokens (the agents' and the
// attacks', all kept under tokens/) appears in any log of any process; the
// token-in-URL attack puts one where a careless proxy would log it.
func assertNoTokenInLogs(t *testing.T, w Where) {
	t.Helper()
	tokens := map[string]string{} // token -> file
	err := filepath.WalkDir(filepath.Join(w.StateDir, "tokens"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		tokens[strings.TrimSpace(string(b))] = p
		return err
	})
	if err != nil || len(tokens) < 4 {
		t.Fatalf("%d token files under %s/tokens: %v", len(tokens), w.StateDir, err)
	}
	logs, err := filepath.Glob(filepath.Join(w.LogDir, "*"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no logs in %s: %v", w.LogDir, err)
	}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		for tok, file := range tokens {
			if bytes.Contains(b, []byte(tok)) {
				t.Errorf("%s contains the token of %s", l, file)
			}
		}
	}
}

func mustComplete(t *testing.T, o Options) *Config {
	t.Helper()
	c, err := o.Complete()
	if err != nil {
		t.Fatal(err)
	}
	return c
}
