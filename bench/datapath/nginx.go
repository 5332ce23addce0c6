package datapath

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/relayproto"
)

// nginxBinary is the system nginx, or "" when there is none (the full-chain
// rows then say so).
func nginxBinary() string {
	p, _ := stack.NginxBinary()
	return p
}

// nginxFront is the shipped nginx/wirekube-relay.conf in front of a bridge,
// as one process (master_process off), so its CPU and memory are one PID's.
type nginxFront struct {
	cmd  *exec.Cmd
	addr string
}

// nginxMain is the main config around the shipped http-context file: enough
// descriptors and connections for the idle-session run (two per session).
func nginxMain(dir string) string {
	return stack.NginxMain{Dir: dir, Include: "site.conf", ErrorLog: dir + "/error.log crit", AccessLog: "off",
		WorkerConnections: 131072, RlimitNofile: 262144}.Render()
}

// startNginx renders the shipped config (only the substitutions the e2e
// suite makes) for this run, with tune's changes (tuneNginx) and then
// those of WIREKUBE_BENCH_NGINX_TUNE, and waits until nginx serves TLS.
// bridge is host:port or unix:/path.
func startNginx(ctx context.Context, bin, dir, bridge, auth, cert, key, tune string) (*nginxFront, error) {
	root, err := stack.RepoRoot()
	if err != nil {
		return nil, err
	}
	shipped, err := os.ReadFile(filepath.Join(root, stack.NginxConfigPath))
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	site, err := stack.RenderNginxConfig(string(shipped), stack.NginxOptions{
		Listen: addr, CertFile: cert, KeyFile: key, ExtauthzHTTP: auth, Bridge: bridge, LogDir: dir})
	if err != nil {
		return nil, err
	}
	for _, t := range []string{tune, os.Getenv(nginxTuneEnv)} {
		if site, err = tuneNginx(site, t); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "site.conf"), []byte(site), 0o644); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxMain(dir)), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-p", dir, "-c", conf, "-g", "daemon off;")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start nginx: %w", err)
	}
	n := &nginxFront{cmd: cmd, addr: addr}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return n, nil
		}
		if time.Now().After(deadline) {
			n.stop()
			return nil, fmt.Errorf("nginx does not listen on %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (n *nginxFront) pid() int { return n.cmd.Process.Pid }

func (n *nginxFront) stop() {
	_ = n.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = n.cmd.Process.Kill()
		<-done
	}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// benchAuth stands in for wirekube-extauthz's HTTP mode behind nginx's
// auth_request: it allows any request whose bearer token is the base64 of
// a key and answers the identity headers for that key. The benchmark
// measures the data path, not the review.
func startBenchAuth() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		if err != nil || len(raw) != relayproto.KeySize {
			w.Header().Set(contract.HeaderDenyReason, string(contract.ReasonTokenMalformed))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		for k, v := range identityHeaders(relayproto.Key(raw)) {
			w.Header()[k] = v
		}
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = hs.Serve(ln) }()
	return ln.Addr().String(), func() { hs.Close() }, nil
}

// benchCert writes a fresh serving certificate for 127.0.0.1 and returns
// its files and a client config that trusts only it.
func benchCert(dir string) (cert, key string, client *tls.Config, err error) {
	ca, err := stack.NewCA("wirekube-bench-ca")
	if err != nil {
		return "", "", nil, err
	}
	kp, err := ca.ServerCert("wirekube-bench", "relay.example.com")
	if err != nil {
		return "", "", nil, err
	}
	cert, key, err = kp.WriteFiles(dir, "bench")
	if err != nil {
		return "", "", nil, err
	}
	return cert, key, &tls.Config{RootCAs: ca.Pool(), ServerName: "relay.example.com", MinVersion: tls.VersionTLS12}, nil
}

// nginxTuneEnv, when set, holds extra directives for trying an nginx
// setting without editing the shipped file: "server:<directives>",
// "relay:<directives>" and "auth:<directives>" parts separated by "|", each
// added at the top of the server block, the relay location or the auth
// location, and "set:<directive> <value>" parts, each replacing the value
// of the first occurrence of a directive the shipped file sets (nginx
// refuses most directives twice in one block). `make bench` leaves it unset
// and measures the shipped file.
const nginxTuneEnv = "WIREKUBE_BENCH_NGINX_TUNE"

// nginxTuneBEnv, when set, adds one more path: the TCP-hop chain with its
// own bridge and these changes (same syntax as nginxTuneEnv; those of
// nginxTuneEnv, which every front gets, apply after them), measured in the same interleaved rounds as the chain
// without them, so a lever's effect is a ratio within one run even on a
// shared machine. `make bench` leaves it unset.
const nginxTuneBEnv = "WIREKUBE_BENCH_NGINX_TUNE_B"

// bridgeEnvBEnv, when set, adds the same path as nginxTuneBEnv (or gives
// its bridge these settings): space-separated KEY=value pairs for the
// path's bridge process, e.g. GOMAXPROCS=1; a first pair BIN=<path> runs
// that build of this test binary as the path's bridge instead (another
// tree's bridge beside this one in the same rounds).
const bridgeEnvBEnv = "WIREKUBE_BENCH_BRIDGE_ENV_B"

func tuneNginx(site, tune string) (string, error) {
	if tune == "" {
		return site, nil
	}
	anchors := map[string]string{
		"server": "server {\n",
		"relay":  "location = /relay {\n",
		"auth":   "location = /_wirekube_auth {\n",
	}
	for _, part := range strings.Split(tune, "|") {
		where, directives, ok := strings.Cut(part, ":")
		if where == "set" {
			name, _, _ := strings.Cut(strings.TrimSpace(directives), " ")
			re := regexp.MustCompile(`(?m)^(\s*)` + regexp.QuoteMeta(name) + `\s[^;]*;`)
			loc := re.FindStringSubmatchIndex(site)
			if loc == nil {
				return "", fmt.Errorf("%s: the shipped file does not set %q", nginxTuneEnv, name)
			}
			site = site[:loc[0]] + site[loc[2]:loc[3]] + strings.TrimSpace(directives) + ";" + site[loc[1]:]
			continue
		}
		anchor := anchors[where]
		if !ok || anchor == "" || strings.Count(site, anchor) != 1 {
			return "", fmt.Errorf("%s: bad part %q", nginxTuneEnv, part)
		}
		site = strings.Replace(site, anchor, anchor+"    "+directives+"\n", 1)
	}
	return site, nil
}
