package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeChildEnv makes the test binary act as a child process (see
// runFakeChild): it listens on its --listen address like the refrelay, and
// fails with the real bind error when that port is taken.
const fakeChildEnv = "WIREKUBE_HARNESS_FAKE_CHILD"

// runFakeChild is the fake child's main: bind every --listen= address (as
// the refrelay does) and --secure-port= with --tls-cert-file and
// --tls-private-key-file (as kube-apiserver does, answering every path 200);
// print the bind error and exit 1 when a port is taken, else serve until
// SIGTERM.
func runFakeChild(args []string) int {
	flags := map[string]string{}
	var lns []net.Listener
	for _, a := range args {
		if name, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok {
			flags[name] = v
		}
		if addr, ok := strings.CutPrefix(a, "--listen="); ok {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				fmt.Fprintf(os.Stderr, "fake child: %v\n", err)
				return 1
			}
			lns = append(lns, ln)
		}
	}
	if port := flags["secure-port"]; port != "" {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
		if err != nil {
			fmt.Fprintf(os.Stderr, "fake child: %v\n", err)
			return 1
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
		go srv.ServeTLS(ln, flags["tls-cert-file"], flags["tls-private-key-file"]) // ends with the process
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	for _, ln := range lns {
		ln.Close()
	}
	return 0
}

func TestRetryPorts(t *testing.T) {
	taken := fmt.Errorf("%w: bind", errAddrInUse)
	other := errors.New("bad flag")
	tests := []struct {
		name       string
		results    []error // what each start returns; the last repeats
		restart    bool    // nil repick
		wantStarts int
		wantRepick int
		wantErr    error
	}{
		{"ok first time", []error{nil}, false, 1, 0, nil},
		{"taken once", []error{taken, nil}, false, 2, 1, nil},
		{"taken twice", []error{taken, taken, nil}, false, 3, 2, nil},
		{"always taken: bounded", []error{taken}, false, PortAttempts, PortAttempts - 1, errAddrInUse},
		{"other error: no retry", []error{other}, false, 1, 0, other},
		{"taken then other", []error{taken, other}, false, 2, 1, other},
		{"restart keeps ports", []error{taken, nil}, true, 2, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			starts, repicks := 0, 0
			var repick func() error
			if !tc.restart {
				repick = func() error { repicks++; return nil }
			}
			err := retryPorts(context.Background(), &out, "fake", repick, func(context.Context) error {
				r := tc.results[min(starts, len(tc.results)-1)]
				starts++
				return r
			})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if starts != tc.wantStarts || repicks != tc.wantRepick {
				t.Errorf("starts %d repicks %d, want %d %d", starts, repicks, tc.wantStarts, tc.wantRepick)
			}
			if n := strings.Count(out.String(), "retrying"); n != tc.wantStarts-1 {
				t.Errorf("logged %d retries, want %d:\n%s", n, tc.wantStarts-1, out.String())
			}
		})
	}
}

func TestRetryPortsRestartHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := retryPorts(ctx, &bytes.Buffer{}, "fake", nil, func(context.Context) error { return errAddrInUse })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestAddrInUse(t *testing.T) {
	procs := newTestProcs(t)
	tests := []struct {
		name   string
		script string
		want   bool
	}{
		{"go bind error", "echo 'listen tcp 127.0.0.1:1: bind: address already in use' >&2; exit 1", true},
		{"nginx bind error", "echo 'nginx: [emerg] bind() to 127.0.0.1:1 failed (98: Address already in use)'; exit 1", true},
		{"other exit", "echo 'unknown flag --x' >&2; exit 2", false},
		{"still running", "echo 'address already in use'; exec sleep 60", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := procs.Start("sh", "/bin/sh", "-c", tc.script)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop(time.Second)
			waitErr := WaitFor(context.Background(), p, time.Second, func(context.Context) error { return errors.New("never ready") })
			if tc.want {
				<-p.Done()
			}
			got := addrInUse(p, waitErr)
			if errors.Is(got, errAddrInUse) != tc.want {
				t.Errorf("addrInUse = %v, want address-in-use %v", got, tc.want)
			}
			if !errors.Is(got, waitErr) {
				t.Errorf("addrInUse lost the cause: %v", got)
			}
		})
	}
	if got := addrInUse(nil, fmt.Errorf("listen: %w", syscall.EADDRINUSE)); !errors.Is(got, errAddrInUse) {
		t.Errorf("EADDRINUSE not recognised: %v", got)
	}
	if addrInUse(nil, nil) != nil {
		t.Error("nil error changed")
	}
}

// TestStartRelayRetriesTakenPort starts a fake relay whose port is really
// taken: the first start fails with the bind error, the retry picks a fresh
// port, and RelayAddr is the one that serves. A restart keeps that address.
func TestStartRelayRetriesTakenPort(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeChildEnv, "1")
	blocker, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	procs := newTestProcs(t)
	s := &Stack{procs: procs, opts: StackOptions{Bins: map[string]string{"wirekube-refrelay": exe}},
		RelayAddr: blocker.Addr().String()}
	if err := s.StartRelay(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.RelayAddr == blocker.Addr().String() {
		t.Fatal("RelayAddr still the taken address")
	}
	if err := dialTCP(s.RelayAddr); err != nil {
		t.Fatalf("relay not serving at the new address: %v", err)
	}
	logs, _ := filepath.Glob(filepath.Join(procs.LogDir, "refrelay.*.log"))
	if len(logs) != 2 {
		t.Errorf("want 2 relay starts, got logs %v", logs)
	}
	out := procs.Out.(*bytes.Buffer).String()
	if !strings.Contains(out, "refrelay: a port was taken (attempt 1/3") {
		t.Errorf("retry not logged:\n%s", out)
	}
	addr := s.RelayAddr
	if err := s.Relay.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.StartRelay(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.RelayAddr != addr {
		t.Errorf("restart moved the relay from %s to %s", addr, s.RelayAddr)
	}
}

// TestStartAPIServerRetriesTakenPort: the first kube-apiserver start finds
// its port taken; the retry moves URL, the admin kubeconfig and the clients
// to a fresh port before anything reads them, and /readyz passes there.
func TestStartAPIServerRetriesTakenPort(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeChildEnv, "1")
	procs := newTestProcs(t)
	c := &Cluster{Dir: t.TempDir(), procs: procs, bins: KubeBinaries{APIServer: exe}}
	if err := c.writeAPIServerArgs("http://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	takenURL := c.URL
	blocker, err := net.Listen("tcp", strings.TrimPrefix(takenURL, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	if err := c.StartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.URL == takenURL {
		t.Fatal("URL still the taken address")
	}
	kc, err := os.ReadFile(c.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kc), "server: "+c.URL+"\n") {
		t.Errorf("admin kubeconfig does not point at %s:\n%s", c.URL, kc)
	}
	if c.Config.Host != c.URL {
		t.Errorf("client config host %s, want %s", c.Config.Host, c.URL)
	}
	if !strings.Contains(procs.Out.(*bytes.Buffer).String(), "kube-apiserver: a port was taken (attempt 1/3") {
		t.Errorf("retry not logged:\n%s", procs.Out)
	}
	if _, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background()); err != nil {
		t.Errorf("readyz at the new URL: %v", err)
	}
}

func newTestProcs(t *testing.T) *Procs {
	t.Helper()
	procs, err := NewProcs(t.TempDir(), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := procs.Close(); err != nil {
			t.Error(err)
		}
	})
	return procs
}
