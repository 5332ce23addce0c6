package datapath

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/wirekube/relay-ws/bridge"
	"github.com/wirekube/relay-ws/internal/netutil"
)

// Every gateway under test runs in a child process (the test binary run
// again with ChildEnv set) so that its CPU time and resident memory are its
// own, not mixed with the load generator's and the reference relay's.
const (
	// ChildEnv, when set to the relay address, makes RunChildIfAsked serve a
	// gateway instead of running the tests.
	ChildEnv = "WIREKUBE_BENCH_BRIDGE_RELAY"
	// childRoleEnv picks the gateway: bridge (default), naive, naive-tls or
	// forward.
	childRoleEnv = "WIREKUBE_BENCH_ROLE"
	// childListenEnv is the gateway's listen address (netutil.Listen form);
	// default a free loopback port.
	childListenEnv = "WIREKUBE_BENCH_LISTEN"
	// childCertEnv is "certfile:keyfile" for naive-tls.
	childCertEnv = "WIREKUBE_BENCH_CERT"
	// childProfileEnv names files for CPU profiles of the children
	// (<value>.<role>.<pid>).
	childProfileEnv = "WIREKUBE_BENCH_BRIDGE_CPUPROFILE"
)

// Gateway roles of a child process.
const (
	roleBridge   = "bridge"
	roleNaive    = "naive"
	roleNaiveTLS = "naive-tls"
	roleForward  = "forward" // forwarder: the floor of a process hop
	// roleWireKube is a build of WireKube's gateway (wireKubeEnv), not this
	// binary: its own main reads the same settings.
	roleWireKube = "wirekube-relay-ws"
)

// RunChildIfAsked serves a gateway in front of the relay named by ChildEnv
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
		f, err := os.Create(fmt.Sprintf("%s.%s.%d", path, os.Getenv(childRoleEnv), os.Getpid()))
		if err != nil {
			return true, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return true, err
		}
		defer pprof.StopCPUProfile()
	}
	return true, serveChild(ctx, os.Getenv(childRoleEnv), relayAddr)
}

func serveChild(ctx context.Context, role, relayAddr string) error {
	listen := os.Getenv(childListenEnv)
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	ln, err := netutil.Listen(listen)
	if err != nil {
		return err
	}
	admin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ln.Close()
		return err
	}
	// The admin listener has one bench-only path: /bench/gc collects and
	// returns freed memory to the OS, so a memory reading counts live
	// memory only.
	mux := http.NewServeMux()
	mux.HandleFunc("/bench/gc", func(http.ResponseWriter, *http.Request) { debug.FreeOSMemory() })
	var serve func() error
	switch role {
	case "", roleBridge:
		srv, err := newBenchBridge(relayAddr)
		if err != nil {
			return err
		}
		mux.Handle("/", srv.AdminHandler())
		serve = func() error { return srv.Run(ctx, ln, nil) }
	case roleNaive, roleNaiveTLS:
		var tlsConf *tls.Config
		if role == roleNaiveTLS {
			cert, key, _ := strings.Cut(os.Getenv(childCertEnv), ":")
			kp, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				return err
			}
			tlsConf = &tls.Config{Certificates: []tls.Certificate{kp}, NextProtos: []string{"http/1.1"}}
		}
		serve = func() error { return newNaiveGateway(relayAddr).serve(ctx, ln, tlsConf) }
	case roleForward:
		serve = func() error { return forwarder{relayAddr: relayAddr}.serve(ctx, ln) }
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	fmt.Printf("LISTEN %s %s\n", ln.Addr(), admin.Addr())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(admin) }()
	defer hs.Close()
	return serve()
}

func newBenchBridge(relayAddr string) (*bridge.Server, error) {
	o := bridge.DefaultOptions()
	o.RelayAddr = relayAddr
	o.DrainTimeout = time.Second
	o.MaxSessions = 100000
	// No revocation stream: the bench has no extauthz to follow (the
	// report notes that a session's binding entry is not in its figures).
	o.RevocationAddr = ""
	// Nor a signature check: the bench sets the identity headers itself
	// (the check is one Ed25519 verification per upgrade, not per byte).
	o.IdentityKeysFile = ""
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	cfg, err := o.Complete()
	if err != nil {
		return nil, err
	}
	return bridge.New(cfg, nil, reg)
}

// child is a running gateway process.
type child struct {
	cmd         *exec.Cmd
	stdin       io.WriteCloser
	addr, admin string
}

// startChildEnv runs this test binary as a gateway of role with the
// KEY=value settings env, or, when the first of them is BIN=<path>, that
// other build of it (an A/B of two bridge builds in one run) with the
// rest.
func startChildEnv(role, relayAddr string, env ...string) (*child, error) {
	bin := os.Args[0]
	if len(env) > 0 && strings.HasPrefix(env[0], "BIN=") {
		bin, env = strings.TrimPrefix(env[0], "BIN="), env[1:]
	}
	return startChildBin(bin, role, relayAddr, env...)
}

// startChildBin runs bin, this test binary or another build of it, as a
// gateway of role; env adds KEY=value settings (childListenEnv,
// childCertEnv).
func startChildBin(bin, role, relayAddr string, env ...string) (*child, error) {
	cmd := exec.Command(bin, "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(append(os.Environ(), ChildEnv+"="+relayAddr, childRoleEnv+"="+role), env...)
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
		return nil, fmt.Errorf("start %s child: %w", role, err)
	}
	c := &child{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if f := strings.Fields(line); err == nil && len(f) == 3 && f[0] == "LISTEN" {
		c.addr, c.admin = f[1], f[2]
		go func() { _, _ = io.Copy(io.Discard, stdout) }()
		return c, nil
	}
	c.stop()
	return nil, fmt.Errorf("%s child: bad first line %q: %v", role, line, err)
}

func (c *child) pid() int { return c.cmd.Process.Pid }

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
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New("gc: " + resp.Status)
	}
	return nil
}
