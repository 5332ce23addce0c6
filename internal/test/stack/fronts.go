package stack

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
	"github.com/wirekube/relay-ws/internal/test/envoystandin"
)

// FrontOptions are the deployment-specific values substituted into a shipped
// front configuration (Caddy, Traefik, the ingress-nginx rendering): every
// other line runs as shipped.
type FrontOptions struct {
	Listen       string // 127.0.0.1:port the front serves TLS on
	CertFile     string
	KeyFile      string
	ExtauthzHTTP string // host:port of wirekube-extauthz --http-listen (or a recorder in front of it)
	Bridge       string // host:port of wirekube-bridge --listen (or a recorder in front of it)
	LogDir       string // the front's log files go here
	// SourceLimit is StartStandin's per-address upgrade limit; zero:
	// envoy.yaml's (envoystandin.Options.SourceLimit).
	SourceLimit envoyconfig.SourceLimit
}

// substitute replaces each old string, which must occur exactly once, so a
// change to a shipped file that the suite would silently not test fails.
func substitute(name, shipped string, subs [][2]string) (string, error) {
	for _, s := range subs {
		if n := strings.Count(shipped, s[0]); n != 1 {
			return "", fmt.Errorf("%s: %q occurs %d times, want 1", name, s[0], n)
		}
		shipped = strings.Replace(shipped, s[0], s[1], 1)
	}
	return shipped, nil
}

// lookBin finds a binary on PATH or at one of the usual system paths.
func lookBin(name string, fallbacks ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, p := range fallbacks {
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH or at %s", name, strings.Join(fallbacks, ", "))
}

func writeConfig(dir, name, content string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("config dir: %w", err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		return "", fmt.Errorf("config: %w", err)
	}
	return p, nil
}

// Standin is an in-process Envoy stand-in started by StartStandin.
type Standin struct {
	Addr string
	stop context.CancelFunc
	done chan error
	log  *os.File
}

// StartStandin runs an Envoy stand-in on a fresh loopback port, logging to
// logName in o.LogDir: the gRPC variant when grpcAddr is set, else the
// http_service variant against o.ExtauthzHTTP.
func StartStandin(o FrontOptions, grpcAddr, logName string) (*Standin, error) {
	kp, err := loadKeyPair(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(o.LogDir, logName))
	if err != nil {
		return nil, fmt.Errorf("standin log: %w", err)
	}
	so := envoystandin.Options{TLS: kp, ExtauthzGRPC: grpcAddr, Bridge: o.Bridge, AccessLog: f,
		Logger:      slog.New(slog.NewJSONHandler(f, nil)).With("component", strings.TrimSuffix(logName, ".log")),
		SourceLimit: o.SourceLimit}
	if grpcAddr == "" {
		so.ExtauthzHTTP = o.ExtauthzHTTP
	}
	srv, err := envoystandin.New(so)
	if err != nil {
		f.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("standin listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Standin{Addr: ln.Addr().String(), stop: cancel, done: make(chan error, 1), log: f}
	go func() { s.done <- srv.Serve(ctx, ln) }() // owned: Close waits
	return s, nil
}

// Close stops the stand-in and waits for it.
func (s *Standin) Close() error {
	s.stop()
	err := <-s.done
	s.log.Close()
	return err
}
