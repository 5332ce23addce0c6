package stack

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/wirekube/relay-ws/internal/test/envoystandin"
)

// EnvBinDir points at prebuilt repository binaries (`make build` puts them in
// bin/); when unset the harness builds them into the run directory.
const EnvBinDir = "WIREKUBE_E2E_BIN_DIR"

// RepoBinaries are the packages the suite runs, by binary name.
var RepoBinaries = map[string]string{
	"wirekube-refrelay": "./internal/test/refrelay/cmd/wirekube-refrelay",
	"wirekube-extauthz": "./extauthz/cmd/wirekube-extauthz",
	"wirekube-bridge":   "./bridge/cmd/wirekube-bridge",
}

// BuildRepoBinaries returns the path of every binary in RepoBinaries, from
// $WIREKUBE_E2E_BIN_DIR or freshly built into dir.
func BuildRepoBinaries(ctx context.Context, repoRoot, dir string, out io.Writer) (map[string]string, error) {
	paths := map[string]string{}
	if bin := os.Getenv(EnvBinDir); bin != "" {
		for name := range RepoBinaries {
			p := filepath.Join(bin, name)
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("%s: %w (run make build)", EnvBinDir, err)
			}
			paths[name] = p
		}
		return paths, nil
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for name, pkg := range RepoBinaries {
		args = append(args, pkg)
		paths[name] = filepath.Join(dir, name)
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %w\n%s", err, b)
	}
	fmt.Fprintf(out, "harness: built the repository binaries in %s\n", time.Since(start).Round(time.Millisecond))
	return paths, nil
}

// StackOptions configure the gateway stack.
type StackOptions struct {
	RepoRoot string
	Dir      string // scratch: certs, nginx prefix
	Bins     map[string]string
	// ExtauthzKubeconfig is the identity extauthz runs as.
	ExtauthzKubeconfig string
	ExtauthzArgs       []string // extra flags
	BridgeArgs         []string // extra flags
}

// Stack is the running gateway: reference relay, extauthz, bridge, nginx
// and the Envoy stand-in, each on its own loopback port.
type Stack struct {
	opts  StackOptions
	procs *Procs

	RelayAddr, ExtauthzGRPC, ExtauthzHTTP, ExtauthzMetrics string
	BridgeAddr, BridgeMetrics, NginxAddr, StandinAddr      string
	// RevocationSocket (unix:/path) and RevocationSecret are extauthz's
	// revocation listener and the secret file it writes, in a directory of
	// their own as the Pod's emptyDir (docs/revocation.md).
	RevocationSocket, RevocationSecret string

	FrontCA *CA // signs the fronts' serving certificate: clients trust only it

	Relay, Extauthz, Bridge, Nginx *Proc
	Envoy                          *Proc // nil when the stand-in runs instead
	// GRPCFront names the gRPC front on StandinAddr: "envoy" or "envoy-standin".
	GRPCFront string

	standinStop context.CancelFunc
	standinDone chan error
	standinLog  *os.File
	standinLn   net.Listener // held from StartStack until the stand-in serves
	mu          sync.Mutex
}

// startTimeout bounds the wait for one component to become ready. It is
// generous for a loaded 2-core CI machine: the wait polls and returns as soon
// as the component is ready, or at once when it exits.
const startTimeout = 60 * time.Second

// StartStack starts every component and waits until each is ready.
func StartStack(ctx context.Context, procs *Procs, o StackOptions) (*Stack, error) {
	s := &Stack{opts: o, procs: procs}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("stack dir: %w", err)
	}
	// The in-process stand-in keeps its listener from now on, so its port
	// cannot be taken in between; the children get ports picked just now.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("front listen: %w", err)
	}
	s.standinLn, s.StandinAddr = ln, ln.Addr().String()
	addrs := []*string{&s.RelayAddr, &s.ExtauthzGRPC, &s.ExtauthzHTTP, &s.ExtauthzMetrics,
		&s.BridgeAddr, &s.BridgeMetrics, &s.NginxAddr}
	for _, a := range addrs {
		var err error
		if *a, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	if s.FrontCA, err = NewCA("wirekube-e2e-front-ca"); err != nil {
		return nil, err
	}
	if s.RevocationSocket, s.RevocationSecret, err = revocationDir(); err != nil {
		return nil, err
	}
	steps := []func(context.Context) error{s.StartRelay, s.StartExtauthz, s.StartBridge, s.startNginx, s.startGRPCFront}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// StartRelay (re)starts the reference relay. A first start whose port was
// taken meanwhile is retried on a fresh one; a restart keeps RelayAddr,
// which the bridge dials.
func (s *Stack) StartRelay(ctx context.Context) error {
	return retryPorts(ctx, s.procs.Out, "refrelay", s.repick(s.Relay, &s.RelayAddr), func(ctx context.Context) error {
		p, err := s.procs.Start("refrelay", s.opts.Bins["wirekube-refrelay"], "--listen="+s.RelayAddr, "--no-udp")
		if err != nil {
			return err
		}
		s.Relay = p
		return addrInUse(p, WaitFor(ctx, p, startTimeout, listensOn(p, s.RelayAddr)))
	})
}

// StartExtauthz (re)starts wirekube-extauthz and waits for its /readyz,
// retrying a first start on fresh ports like StartRelay.
func (s *Stack) StartExtauthz(ctx context.Context) error {
	repick := s.repick(s.Extauthz, &s.ExtauthzGRPC, &s.ExtauthzHTTP, &s.ExtauthzMetrics)
	return retryPorts(ctx, s.procs.Out, "extauthz", repick, func(ctx context.Context) error {
		args := append([]string{
			"--grpc-listen=" + s.ExtauthzGRPC, "--http-listen=" + s.ExtauthzHTTP,
			"--metrics-listen=" + s.ExtauthzMetrics, "--kubeconfig=" + s.opts.ExtauthzKubeconfig,
			"--revocation-listen=" + s.RevocationSocket, "--revocation-secret-file=" + s.RevocationSecret,
			"--identity-keys-file=" + s.IdentityKeysFile(),
			"--log-format=json",
		}, s.opts.ExtauthzArgs...)
		p, err := s.procs.Start("extauthz", s.opts.Bins["wirekube-extauthz"], args...)
		if err != nil {
			return err
		}
		s.Extauthz = p
		return addrInUse(p, WaitFor(ctx, p, startTimeout, HTTPOK("http://"+s.ExtauthzMetrics+"/readyz")))
	})
}

// RestartExtauthz stops wirekube-extauthz and starts it again on the same
// ports with args as its extra flags (nil: none), re-reading its kubeconfig.
func (s *Stack) RestartExtauthz(ctx context.Context, args []string) error {
	if s.Extauthz != nil {
		if err := s.Extauthz.Stop(15 * time.Second); err != nil {
			return fmt.Errorf("stop extauthz: %w", err)
		}
	}
	s.opts.ExtauthzArgs = args
	// The new extauthz wrote its new per-start key into the keys file before
	// its /readyz passed; the bridge's first lookup of that key sees the
	// file changed and re-reads it, so nothing is waited for here.
	return s.StartExtauthz(ctx)
}

// StartBridge (re)starts wirekube-bridge and waits for its /readyz,
// retrying a first start on fresh ports like StartRelay.
func (s *Stack) StartBridge(ctx context.Context) error {
	repick := s.repick(s.Bridge, &s.BridgeAddr, &s.BridgeMetrics)
	return retryPorts(ctx, s.procs.Out, "bridge", repick, func(ctx context.Context) error {
		args := append([]string{
			"--listen=" + s.BridgeAddr, "--metrics-listen=" + s.BridgeMetrics, "--relay-addr=" + s.RelayAddr,
			"--log-format=json",
		}, append(s.RevocationArgs(), s.opts.BridgeArgs...)...)
		p, err := s.procs.Start("bridge", s.opts.Bins["wirekube-bridge"], args...)
		if err != nil {
			return err
		}
		s.Bridge = p
		return addrInUse(p, WaitFor(ctx, p, startTimeout, HTTPOK("http://"+s.BridgeMetrics+"/readyz")))
	})
}

// RevocationArgs are the bridge flags of the stack's revocation stream and
// of the identity signature keys extauthz publishes beside its secret.
func (s *Stack) RevocationArgs() []string {
	return []string{"--revocation-addr=" + s.RevocationSocket, "--revocation-secret-file=" + s.RevocationSecret,
		"--identity-keys-file=" + s.IdentityKeysFile()}
}

// IdentityKeysFile is where the stack's extauthz publishes the public
// halves of its identity signing keys (its --identity-keys-file), in the
// directory it shares with the bridge like a Pod's emptyDir.
func (s *Stack) IdentityKeysFile() string {
	return filepath.Join(filepath.Dir(s.RevocationSecret), "identity-keys")
}

// revocationDir makes a short private directory for a revocation socket
// (a Unix socket path has at most 107 bytes) and returns the socket
// address and the secret file in it.
func revocationDir() (socket, secret string, err error) {
	dir, err := os.MkdirTemp("", "wkrev")
	if err != nil {
		return "", "", fmt.Errorf("revocation dir: %w", err)
	}
	return "unix:" + filepath.Join(dir, "revocation.sock"), filepath.Join(dir, "secret"), nil
}

// repick returns the re-pick function for retryPorts: fresh addresses when
// prev is nil (a first start: nothing has read them yet), nil for a restart.
func (s *Stack) repick(prev *Proc, addrs ...*string) func() error {
	if prev != nil {
		return nil
	}
	return func() error { return repickAddrs(addrs...) }
}

func (s *Stack) frontCert() (certFile, keyFile string, err error) {
	kp, err := s.FrontCA.ServerCert("wirekube-relay-e2e", "relay.example.com")
	if err != nil {
		return "", "", err
	}
	return kp.WriteFiles(s.opts.Dir, "front")
}

func (s *Stack) startNginx(ctx context.Context) error {
	cert, key, err := s.frontCert()
	if err != nil {
		return err
	}
	return retryPorts(ctx, s.procs.Out, "nginx", s.repick(s.Nginx, &s.NginxAddr), func(ctx context.Context) error {
		p, err := StartNginx(ctx, s.procs, s.opts.RepoRoot, filepath.Join(s.opts.Dir, "nginx"), NginxOptions{
			Listen: s.NginxAddr, CertFile: cert, KeyFile: key,
			ExtauthzHTTP: s.ExtauthzHTTP, Bridge: s.BridgeAddr, LogDir: s.procs.LogDir,
		})
		if p != nil {
			s.Nginx = p
		}
		return addrInUse(p, err)
	})
}

// startGRPCFront runs real Envoy when one is on PATH, else the stand-in.
func (s *Stack) startGRPCFront(ctx context.Context) error {
	if bin := RealEnvoy(); bin != "" {
		s.GRPCFront = "envoy"
		return s.startEnvoy(ctx, bin)
	}
	s.GRPCFront = "envoy-standin"
	return s.startStandin(ctx)
}

// startStandin runs the Envoy stand-in in this process, logging to its own
// file in the log directory like the other components.
func (s *Stack) startStandin(ctx context.Context) error {
	cert, key, err := s.frontCert()
	if err != nil {
		return err
	}
	kp, err := loadKeyPair(cert, key)
	if err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(s.procs.LogDir, "envoy-standin.log"))
	if err != nil {
		return fmt.Errorf("standin log: %w", err)
	}
	srv, err := envoystandin.New(envoystandin.Options{
		TLS: kp, ExtauthzGRPC: s.ExtauthzGRPC, Bridge: s.BridgeAddr,
		Logger:    slog.New(slog.NewJSONHandler(f, nil)).With("component", "envoy-standin"),
		AccessLog: f, // Envoy writes its access log to stdout, beside its own log
	})
	if err != nil {
		f.Close()
		return err
	}
	ln := s.standinLn
	s.standinLn = nil
	runCtx, cancel := context.WithCancel(context.Background())
	s.standinStop, s.standinDone, s.standinLog = cancel, make(chan error, 1), f
	go func() { s.standinDone <- srv.Serve(runCtx, ln) }() // owned: Close waits
	fmt.Fprintf(s.procs.Out, "harness: started envoy stand-in (in process) on %s\n", s.StandinAddr)
	return nil
}

// Close stops the in-process stand-in; the processes belong to Procs.
func (s *Stack) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.standinLn != nil {
		s.standinLn.Close()
		s.standinLn = nil
	}
	if s.standinStop != nil {
		s.standinStop()
		<-s.standinDone
		s.standinLog.Close()
		s.standinStop = nil
	}
}

// HTTPOK is a WaitFor condition: a GET of url answers 200.
func HTTPOK(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}
