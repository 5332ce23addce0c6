package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// childEnv makes the test binary run main() itself (for the SIGTERM test).
const childEnv = "WIREKUBE_BRIDGE_TEST_MAIN"

func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		os.Args = append([]string{"wirekube-bridge"}, strings.Fields(args)...)
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

// TestSIGTERMDrainsAndExits runs the real main in a child process, sends it
// SIGTERM and expects a drain log line and exit status 0.
func TestSIGTERMDrainsAndExits(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "b.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=--listen=unix:"+sock+" --metrics-listen= --drain-timeout=2s --log-format=text")
	stderr := &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil { // the test failed before the child exited
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Logf("child stderr: %s", stderr)
		}
	})
	testutil.Eventually(t, "the child's serving log line", func() bool {
		return strings.Contains(stderr.String(), "bridge serving")
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v; stderr: %s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("no exit after SIGTERM")
	}
	if !strings.Contains(stderr.String(), "msg=draining") {
		t.Fatalf("no drain log line: %s", stderr.String())
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--ping-interval=0s"}, "--ping-interval"},
		{[]string{"--max-sessions=-1"}, "--max-sessions"},
		{[]string{"--log-format=yaml"}, "--log-format"},
		{[]string{"--log-level=trace"}, "--log-level"},
		{[]string{"--relay-addr=bad"}, "--relay-addr"},
		{[]string{"--register-timeout=soon"}, "register-timeout"},
		{[]string{"extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		err := run(context.Background(), tt.args, io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error()+stderr.String(), tt.want) {
			t.Errorf("run(%q) = %v, want an error naming %s", tt.args, err, tt.want)
		}
	}
}

// TestRunServesUnixSocketAndStopsOnCancel: --listen unix:/path works and a
// cancelled context (what SIGTERM does) drains and returns.
func TestRunServesUnixSocketAndStopsOnCancel(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "bridge.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--listen=unix:" + sock, "--metrics-listen=", "--drain-timeout=1s"}, io.Discard, &stderr)
	}()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer client.CloseIdleConnections()
	testutil.Eventually(t, "/healthz on the unix socket", func() bool {
		resp, err := client.Get("http://bridge/healthz")
		if err != nil {
			return false // not listening yet
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz = %d", resp.StatusCode)
		}
		return true
	})
	client.CloseIdleConnections()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout.String(), "wirekube-bridge dev (go") || stderr.Len() != 0 {
		t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
}

// TestVersionInLogAndMetrics: the first log line carries the version, and
// /metrics has wirekube_build_info; --log-level=warn drops info lines.
func TestVersionInLogAndMetrics(t *testing.T) {
	for _, tt := range []struct {
		level     string
		wantStart bool
	}{{"info", true}, {"warn", false}} {
		t.Run(tt.level, func(t *testing.T) {
			dir := t.TempDir()
			sock, msock := filepath.Join(dir, "b.sock"), filepath.Join(dir, "m.sock")
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			var stderr bytes.Buffer
			go func() {
				done <- run(ctx, []string{"--listen=unix:" + sock, "--metrics-listen=unix:" + msock,
					"--drain-timeout=1s", "--log-level=" + tt.level}, io.Discard, &stderr)
			}()
			client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", msock)
			}}}
			var metrics string
			testutil.Eventually(t, "/metrics", func() bool {
				resp, err := client.Get("http://bridge/metrics")
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				metrics = string(b)
				return resp.StatusCode == http.StatusOK
			})
			client.CloseIdleConnections()
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(metrics, `wirekube_build_info{goversion="go`) || !strings.Contains(metrics, `version="dev"} 1`) {
				t.Errorf("/metrics lacks wirekube_build_info:\n%.400s", metrics)
			}
			first, _, _ := strings.Cut(stderr.String(), "\n")
			gotStart := strings.Contains(first, `"msg":"wirekube-bridge starting"`) && strings.Contains(first, `"version":"dev"`)
			if gotStart != tt.wantStart {
				t.Errorf("first log line %q: version line = %v, want %v", first, gotStart, tt.wantStart)
			}
			if !tt.wantStart && strings.Contains(stderr.String(), `"level":"INFO"`) {
				t.Errorf("--log-level=warn logged info lines:\n%s", stderr.String())
			}
		})
	}
}
