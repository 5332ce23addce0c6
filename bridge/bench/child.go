package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/wirekube/relay-ws/bridge"
)

// The bridge under test runs in a child process (the test binary run again
// with ChildEnv set) so that its resident memory is its own, not mixed
// with the clients' and the reference relay's.
const (
	// ChildEnv, when set to the relay address, makes RunChildIfAsked serve a
	// bridge instead of running the tests.
	ChildEnv = "WIREKUBE_BENCH_BRIDGE_RELAY"
	// childProfileEnv names a file for a CPU profile of the bridge child.
	childProfileEnv = "WIREKUBE_BENCH_BRIDGE_CPUPROFILE"
)

// RunChildIfAsked serves a bridge in front of the relay named by ChildEnv
// until stdin closes, printing "LISTEN <relay-path-addr> <admin-addr>" on
// stdout first. It returns false at once when ChildEnv is unset. Call it
// first thing in TestMain.
func RunChildIfAsked() (bool, error) {
	relayAddr := os.Getenv(ChildEnv)
	if relayAddr == "" {
		return false, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // stdin closes when the parent is done
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if path := os.Getenv(childProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return true, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return true, err
		}
		defer pprof.StopCPUProfile()
	}
	return true, serveChild(ctx, relayAddr)
}

func serveChild(ctx context.Context, relayAddr string) error {
	o := bridge.DefaultOptions()
	o.RelayAddr = relayAddr
	o.DrainTimeout = time.Second
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	srv, err := bridge.New(o, nil, reg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	admin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ln.Close()
		return err
	}
	fmt.Printf("LISTEN %s %s\n", ln.Addr(), admin.Addr())
	// The admin listener gets one bench-only path on top of the bridge's:
	// /bench/gc collects and returns freed memory to the OS, so a memory
	// reading counts live memory only.
	mux := http.NewServeMux()
	mux.Handle("/", srv.AdminHandler())
	mux.HandleFunc("/bench/gc", func(http.ResponseWriter, *http.Request) { debug.FreeOSMemory() })
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(admin) }()
	defer hs.Close()
	return srv.Run(ctx, ln, nil)
}

// startInProcess serves a bridge in this process on a loopback port and
// returns its relay URL and a stop function that drains it.
func startInProcess(relayAddr string) (string, func(), error) {
	o := bridge.DefaultOptions()
	o.RelayAddr = relayAddr
	o.DrainTimeout = time.Second
	srv, err := bridge.New(o, nil, prometheus.NewRegistry())
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln, nil) }()
	return "ws://" + ln.Addr().String() + "/relay", func() { cancel(); <-done }, nil
}

// child is a running bridge process.
type child struct {
	cmd         *exec.Cmd
	stdin       io.WriteCloser
	addr, admin string
}

func startChild(relayAddr string) (*child, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), ChildEnv+"="+relayAddr)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start bridge child: %w", err)
	}
	c := &child{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if f := strings.Fields(line); err == nil && len(f) == 3 && f[0] == "LISTEN" {
		c.addr, c.admin = f[1], f[2]
		go func() { _, _ = io.Copy(io.Discard, stdout) }()
		return c, nil
	}
	c.stop()
	return nil, fmt.Errorf("bridge child: bad first line %q: %v", line, err)
}

// stop closes the child's stdin (it drains and exits) and waits for it.
func (c *child) stop() {
	c.stdin.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// gc asks the child to collect garbage and return it to the OS.
func (c *child) gc() error {
	resp, err := http.Get("http://" + c.admin + "/bench/gc")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// rss is the child's resident set size in bytes (VmRSS in /proc).
func (c *child) rss() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// goMemory is heap in use plus goroutine stacks in use, from the child's
// /metrics (Go collector).
func (c *child) goMemory() (int64, error) {
	resp, err := http.Get("http://" + c.admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var total int64
	found := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && (f[0] == "go_memstats_heap_inuse_bytes" || f[0] == "go_memstats_stack_inuse_bytes") {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return 0, err
			}
			total += int64(v)
			found++
		}
	}
	if found != 2 {
		return 0, fmt.Errorf("memstats not found in /metrics (%d of 2)", found)
	}
	return total, sc.Err()
}
