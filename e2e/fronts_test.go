//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/wirekube/relay-ws/internal/test/stack"
)

// The front matrix: every front the project ships or documents, each a real
// proxy binary (or the Envoy stand-in, clearly named) with the shipped
// configuration, in front of the stack's extauthz and bridge. Every row runs
// the same cases (frontcases_test.go); where a front cannot give the contract's
// answer, its row says what it really does and docs/deploy.md's front table says
// the same. Each row's auth and bridge hops go through a HeadRecorder, so the
// hardening tests see exactly which headers the proxy sent.

// frontRow is one front of the matrix.
type frontRow struct {
	front
	short     string              // peer name prefix
	runs      string              // what runs, with its version
	authHop   *stack.HeadRecorder // front -> extauthz (HTTP or gRPC)
	grpcAuth  bool                // the auth hop is gRPC: its heads are not HTTP/1.1
	bridgeHop *stack.HeadRecorder // front -> bridge
	logDir    string              // this front's own log files
	procLogs  []string            // the process's stdout/stderr logs

	// Where the front departs from the contract (asserted as it is):
	lossy          bool // 400 and 503 become 500; no X-WireKube-Deny-Reason reaches the client (ingress-nginx)
	authSeesClient bool // client X-WireKube-* reach the auth service (ingress-nginx: no snippet to clear them)
	keepsAuthz     bool // Authorization reaches the bridge (ingress-nginx without a snippet)
	upgradeAtAuth  bool // the auth service sees the client's Upgrade, so it refuses a plain GET itself
	ownDupAuth     bool // the proxy refuses a repeated Authorization itself (nginx's own 400, no reason)
	stripsFamily   bool // every client X-WireKube-* name goes, not only the contract's five
	// rejectsUnderscores: a header name with an underscore gets 400 before
	// any filter (envoy.yaml's headers_with_underscores_action).
	rejectsUnderscores bool
	// ownLogs: this row's log test is here. nginx's and the gRPC stand-in's
	// access logs are tested by e2e/logs_test.go.
	ownLogs bool

	mu     sync.Mutex
	tokens []string // every token this row sent, for its log scan
}

func (r *frontRow) track(tok string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens = append(r.tokens, tok)
	return tok
}

// frontMatrix is the running matrix: its rows and the second extauthz whose
// Kubernetes API link is cut (TokenReview unavailable: the 503 column).
type frontMatrix struct {
	rows    []*frontRow
	cutGRPC string
	cutHTTP string
	closers []func() error
}

func (m *frontMatrix) close() {
	for i := len(m.closers) - 1; i >= 0; i-- {
		m.closers[i]()
	}
}

// newFrontMatrix starts every front; the processes belong to e.procs.
func (e *env) newFrontMatrix(t *testing.T) *frontMatrix {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	m := &frontMatrix{}
	t.Cleanup(m.close)
	var err error
	m.cutGRPC, m.cutHTTP, err = e.startCutExtauthz(ctx, m)
	fatalIf(t, err)
	kp, err := e.stack.FrontCA.ServerCert("wirekube-relay-matrix", "relay.example.com")
	fatalIf(t, err)
	cert, key, err := kp.WriteFiles(filepath.Join(e.runDir, "matrix"), "front")
	fatalIf(t, err)
	tlsConf := &tls.Config{RootCAs: e.stack.FrontCA.Pool(), MinVersion: tls.VersionTLS12}
	for _, s := range e.frontStarts(ctx, t, m) {
		r := s.row
		o := e.rowHops(t, m, r)
		o.CertFile, o.KeyFile = cert, key
		listen, logs, err := s.start(o, filepath.Join(e.runDir, "matrix", r.name))
		if err != nil {
			t.Fatalf("front %s: %v", r.name, err)
		}
		r.procLogs = logs
		r.url, r.base, r.tls = "wss://"+listen+"/relay", "https://"+listen, tlsConf
		fatalIf(t, waitFrontRoutes(ctx, r.front))
		m.rows = append(m.rows, r)
	}
	return m
}

// frontStart is one row and how to start its front with the given hops; it
// returns the address the front serves on and its process logs.
type frontStart struct {
	row   *frontRow
	start func(o stack.FrontOptions, dir string) (addr string, logs []string, err error)
}

// frontStarts is the table of fronts.
func (e *env) frontStarts(ctx context.Context, t *testing.T, m *frontMatrix) []frontStart {
	traefik, err := stack.FindTraefik(ctx, e.repo, testWriter{t})
	fatalIf(t, err)
	caddyVersion, err := stack.CaddyVersion(ctx, "caddy")
	fatalIf(t, err)
	proc := func(p *stack.Proc, o stack.FrontOptions, err error) (string, []string, error) {
		return o.Listen, procLogs(p), err
	}
	return []frontStart{
		{&frontRow{front: front{name: "nginx"}, short: "mn", runs: "Debian nginx, nginx/wirekube-relay.conf",
			upgradeAtAuth: true, ownDupAuth: true},
			func(o stack.FrontOptions, dir string) (string, []string, error) {
				p, err := stack.StartNginx(ctx, e.procs, e.repo, dir, stack.NginxOptions{Listen: o.Listen,
					CertFile: o.CertFile, KeyFile: o.KeyFile, ExtauthzHTTP: o.ExtauthzHTTP, Bridge: o.Bridge, LogDir: o.LogDir})
				return proc(p, o, err)
			}},
		{&frontRow{front: front{name: "ingress-nginx"}, short: "mi", runs: "Debian nginx, ingress-nginx rendering of manifests/examples/ingress-nginx",
			lossy: true, authSeesClient: true, keepsAuthz: true, ownDupAuth: true, ownLogs: true},
			func(o stack.FrontOptions, dir string) (string, []string, error) {
				p, err := stack.StartIngressNginx(ctx, e.procs, e.repo, dir, o)
				return proc(p, o, err)
			}},
		{&frontRow{front: front{name: "caddy"}, short: "mc", runs: "Debian caddy " + caddyVersion + ", deploy/caddy/Caddyfile",
			stripsFamily: true, ownLogs: true},
			func(o stack.FrontOptions, dir string) (string, []string, error) {
				p, err := stack.StartCaddy(ctx, e.procs, e.repo, dir, o)
				return proc(p, o, err)
			}},
		{&frontRow{front: front{name: "traefik"}, short: "mt", runs: "traefik " + stack.TraefikVersion + " (Go module proxy), deploy/traefik/",
			ownLogs: true},
			func(o stack.FrontOptions, dir string) (string, []string, error) {
				p, err := stack.StartTraefik(ctx, e.procs, e.repo, dir, traefik, o)
				return proc(p, o, err)
			}},
		{&frontRow{front: front{name: "envoy-standin-grpc"}, short: "mg", grpcAuth: true, upgradeAtAuth: true, stripsFamily: true, rejectsUnderscores: true,
			runs: "in-process Envoy stand-in, gRPC ext_authz as envoy/envoy.yaml"},
			func(o stack.FrontOptions, dir string) (string, []string, error) {
				// The row's auth recorder forwards to extauthz's gRPC listener.
				return e.startMatrixStandin(m, o, o.ExtauthzHTTP)
			}},
		{&frontRow{front: front{name: "envoy-standin-http"}, short: "mh", upgradeAtAuth: true, stripsFamily: true, rejectsUnderscores: true, ownLogs: true,
			runs: "in-process Envoy stand-in, http_service as docs/proxy-snippets.md"},
			func(o stack.FrontOptions, dir string) (string, []string, error) {
				return e.startMatrixStandin(m, o, "")
			}},
	}
}

// rowHops starts the row's two recorders and log dir and returns the front
// options pointing at them (certificate paths left to the caller).
func (e *env) rowHops(t *testing.T, m *frontMatrix, r *frontRow) stack.FrontOptions {
	target := e.stack.ExtauthzHTTP
	if r.grpcAuth {
		target = e.stack.ExtauthzGRPC
	}
	start := stack.StartHeadRecorder
	if r.grpcAuth {
		start = stack.StartForwarder // HTTP/2: nothing to record
	}
	var err error
	r.authHop, err = start(target)
	fatalIf(t, err)
	m.closers = append(m.closers, r.authHop.Close)
	r.bridgeHop, err = stack.StartHeadRecorder(e.stack.BridgeAddr)
	fatalIf(t, err)
	m.closers = append(m.closers, r.bridgeHop.Close)
	r.logDir = filepath.Join(e.procs.LogDir, "fronts", r.name)
	fatalIf(t, os.MkdirAll(r.logDir, 0o755))
	free, err := stack.FreeAddr()
	fatalIf(t, err)
	return stack.FrontOptions{Listen: free, ExtauthzHTTP: r.authHop.Addr, Bridge: r.bridgeHop.Addr, LogDir: r.logDir}
}

func procLogs(p *stack.Proc) []string {
	if p == nil {
		return nil
	}
	return []string{p.LogPath}
}

// startMatrixStandin starts an Envoy stand-in: gRPC to grpcAddr (the row's
// auth recorder) when set, else the http_service variant. It returns its
// listen address and log file.
func (e *env) startMatrixStandin(m *frontMatrix, o stack.FrontOptions, grpcAddr string) (string, []string, error) {
	name := "envoy-standin-http.log"
	if grpcAddr != "" {
		name = "envoy-standin-grpc.log"
	}
	s, err := stack.StartStandin(o, grpcAddr, name)
	if err != nil {
		return "", nil, err
	}
	m.closers = append(m.closers, s.Close)
	return s.Addr, nil, nil
}

// waitFrontRoutes waits until the front routes /relay to the auth service
// (Traefik loads its file provider after it listens): a request without a
// token gets 401.
func waitFrontRoutes(ctx context.Context, f front) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := rawErr(f, "GET", "/relay", upgradeHeader(""))
		if err == nil && got.status == 401 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("front %s does not route /relay: %+v %v", f.name, got, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startCutExtauthz runs a second wirekube-extauthz whose Kubernetes API
// link goes through a forwarder; once it is ready the link is cut, so every
// TokenReview fails (503 review_unavailable) while its caches stay synced.
func (e *env) startCutExtauthz(ctx context.Context, m *frontMatrix) (grpcAddr, httpAddr string, err error) {
	cfg, err := clientcmd.LoadFromFile(e.extauthzKubeconfigPath)
	if err != nil {
		return "", "", err
	}
	apiHost := ""
	for _, c := range cfg.Clusters {
		apiHost = c.Server
	}
	link, err := stack.StartForwarder(hostOf(apiHost))
	if err != nil {
		return "", "", err
	}
	m.closers = append(m.closers, link.Close)
	for _, c := range cfg.Clusters {
		c.Server = "https://" + link.Addr
	}
	kubeconfig := filepath.Join(e.runDir, "matrix", "extauthz-cut.kubeconfig")
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o755); err != nil {
		return "", "", err
	}
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		return "", "", err
	}
	var metrics string
	for _, a := range []*string{&grpcAddr, &httpAddr, &metrics} {
		if *a, err = stack.FreeAddr(); err != nil {
			return "", "", err
		}
	}
	p, err := e.procs.Start("extauthz-cut", e.bins["wirekube-extauthz"], "--grpc-listen="+grpcAddr,
		"--http-listen="+httpAddr, "--metrics-listen="+metrics, "--kubeconfig="+kubeconfig, "--log-format=json",
		"--revocation-listen=", "--identity-keys-file=") // no bridge follows this extauthz: no revocation stream, no keys to publish
	if err != nil {
		return "", "", err
	}
	if err := stack.WaitFor(ctx, p, 60*time.Second, stack.HTTPOK("http://"+metrics+"/readyz")); err != nil {
		return "", "", err
	}
	link.SetTarget("")
	return grpcAddr, httpAddr, nil
}
