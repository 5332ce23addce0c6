package demo

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wirekube/relay-ws/internal/test/render"
	"github.com/wirekube/relay-ws/internal/test/stack"
)

// agentSA is the agent DaemonSet's ServiceAccount, the one wirekube-extauthz
// allows by default (wirekube-system/wirekube-agent, Pod- or Node-bound).
const agentSA = "wirekube-agent"

// tokenTTL is the life of the demo's tokens; `make up` prints how to issue
// fresh ones.
const tokenTTL = time.Hour

// env is the running demo stack. Every process in it belongs to procs and is
// stopped by PID in close.
type env struct {
	opts    Options
	state   *stateDir
	procs   *stack.Procs
	cluster *stack.Cluster
	gw      *stack.Stack

	frontName string // "envoy" or "nginx"
	frontAddr string // 127.0.0.1:port
	tls       *tls.Config
	caFile    string
	kubecfg   string
	pids      []int
}

// url is the relay endpoint through the front.
func (e *env) url() string { return "wss://" + e.frontAddr + "/relay" }

// startEnv brings up the cluster and the gateway, each phase one step of
// rep. On error the processes started so far are stopped by the caller's
// close (e is returned even then).
func startEnv(ctx context.Context, o Options, st *stateDir, rep *Report) (*env, error) {
	procs, err := stack.NewProcs(st.join("logs"), prefixWriter{o.Progress})
	if err != nil {
		return nil, err
	}
	e := &env{opts: o, state: st, procs: procs}
	rep.Where.StateDir, rep.Where.LogDir = st.path, procs.LogDir
	installer := nginxInstaller{
		allowed: o.InstallNginx, isRoot: os.Geteuid() == 0, have: haveNginx,
		run: execRunner(o.Progress), out: o.Progress, script: filepath.Join(o.RepoRoot, aptInstall),
	}
	var bins stack.KubeBinaries
	var repoBins map[string]string
	steps := []struct {
		name string
		fn   func() (string, error)
	}{
		{"nginx available", func() (string, error) { return "", installer.ensure(ctx) }},
		{"etcd and kube-apiserver binaries", func() (d string, err error) { bins, d, err = e.kubeBinaries(ctx); return d, err }},
		{"etcd and kube-apiserver running", func() (string, error) { return e.startCluster(ctx, bins) }},
		{"CRD, namespace and agent ServiceAccount", func() (string, error) { return e.seed(ctx) }},
		{"wirekube binaries", func() (d string, err error) { repoBins, d, err = e.repoBinaries(ctx); return d, err }},
		{"relay, extauthz, bridge and TLS front running", func() (string, error) { return e.startGateway(ctx, repoBins, rep) }},
	}
	for _, s := range steps {
		if err := rep.run(o.Progress, s.name, s.fn); err != nil {
			return e, err
		}
	}
	return e, nil
}

// kubeBinaries finds or builds etcd and kube-apiserver; a cold build takes
// minutes, so say so before the harness starts it.
func (e *env) kubeBinaries(ctx context.Context) (stack.KubeBinaries, string, error) {
	cache := filepath.Join(e.opts.RepoRoot, "e2e", ".cache", "kube", stack.KubeVersion)
	_, aerr := os.Stat(filepath.Join(cache, "kube-apiserver"))
	_, eerr := os.Stat(filepath.Join(cache, "etcd"))
	userBins := os.Getenv(stack.EnvKubebuilderAssets) != "" || os.Getenv(stack.EnvAPIServer) != ""
	cold := !userBins && (aerr != nil || eerr != nil)
	if cold {
		fmt.Fprintf(e.opts.Progress, "demo: first run: compiling etcd and kube-apiserver %s from the Go module proxy into %s\n"+
			"demo: this takes about 5-10 minutes on an idle 2-core machine (longer under load); later runs reuse the cache\n", stack.KubeVersion, cache)
	}
	start := time.Now()
	bins, err := stack.FindKubeBinaries(ctx, e.opts.RepoRoot, prefixWriter{e.opts.Progress})
	if err != nil {
		return bins, "", err
	}
	if cold {
		return bins, fmt.Sprintf("built in %s, cached in %s", time.Since(start).Round(time.Second), cache), nil
	}
	return bins, bins.APIServer, nil
}

func (e *env) startCluster(ctx context.Context, bins stack.KubeBinaries) (string, error) {
	c, err := stack.StartCluster(ctx, e.procs, bins, e.state.join("cluster"))
	if c != nil {
		e.cluster = c
	}
	if err != nil {
		return "", err
	}
	e.pids = append(e.pids, c.Etcd.PID(), c.APIServer.PID())
	kc, err := os.ReadFile(c.AdminKubeconfig)
	if err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	if e.kubecfg, err = e.state.writeFile("kubeconfig", kc, 0o600); err != nil {
		return "", err
	}
	return c.URL, nil
}

// seed installs the project's own CRD fixtures (wirekubepeers,
// wirekubemeshes; the third-party ones in manifests/ are for other tests) and
// the agent's namespace and ServiceAccount.
func (e *env) seed(ctx context.Context) (string, error) {
	crds, err := render.CRDs()
	if err != nil {
		return "", err
	}
	var names []string
	for _, crd := range crds {
		if !strings.HasPrefix(crd.Name, "wirekube") {
			continue
		}
		if err := e.cluster.InstallCRD(ctx, crd.Data); err != nil {
			return "", err
		}
		names = append(names, strings.TrimSuffix(crd.Name, ".yaml"))
	}
	if err := e.cluster.EnsureNamespace(ctx, stack.Namespace); err != nil {
		return "", err
	}
	if _, err := e.cluster.CreateServiceAccount(ctx, stack.Namespace, agentSA); err != nil {
		return "", err
	}
	return fmt.Sprintf("CRDs %s; %s/%s", strings.Join(names, ", "), stack.Namespace, agentSA), nil
}

// repoBinaries uses --bin-dir when given, else lets the harness build them.
func (e *env) repoBinaries(ctx context.Context) (map[string]string, string, error) {
	if e.opts.BinDir == "" {
		bins, err := stack.BuildRepoBinaries(ctx, e.opts.RepoRoot, e.state.join("bin"), prefixWriter{e.opts.Progress})
		return bins, "built into " + e.state.join("bin"), err
	}
	bins := map[string]string{}
	for name := range stack.RepoBinaries {
		p := filepath.Join(e.opts.BinDir, name)
		if _, err := os.Stat(p); err != nil {
			return nil, "", fmt.Errorf("--bin-dir: %w (run make build)", err)
		}
		bins[name] = p
	}
	return bins, "from " + e.opts.BinDir, nil
}

// startGateway starts the relay, extauthz (with the admin kubeconfig), the
// bridge and the fronts, and picks the front the demo uses: real Envoy when
// the harness found one on PATH, else nginx.
func (e *env) startGateway(ctx context.Context, bins map[string]string, rep *Report) (string, error) {
	if err := os.MkdirAll(e.state.join("stack"), 0o755); err != nil {
		return "", fmt.Errorf("stack dir: %w", err)
	}
	gw, err := stack.StartStack(ctx, e.procs, stack.StackOptions{
		RepoRoot: e.opts.RepoRoot, Dir: e.state.join("stack"), Bins: bins,
		ExtauthzKubeconfig: e.cluster.AdminKubeconfig,
		ExtauthzArgs:       []string{"--log-level=" + e.opts.LogLevel},
		BridgeArgs:         []string{"--log-level=" + e.opts.LogLevel},
	})
	if err != nil {
		return "", err
	}
	e.gw = gw
	for _, p := range []*stack.Proc{gw.Relay, gw.Extauthz, gw.Bridge, gw.Nginx, gw.Envoy} {
		if p != nil {
			e.pids = append(e.pids, p.PID())
		}
	}
	e.frontName, e.frontAddr = "nginx", gw.NginxAddr
	if gw.GRPCFront == "envoy" {
		e.frontName, e.frontAddr = "envoy", gw.StandinAddr
	}
	if e.caFile, err = e.state.writeFile("ca.crt", gw.FrontCA.CertPEM, 0o644); err != nil {
		return "", err
	}
	e.tls = &tls.Config{RootCAs: gw.FrontCA.Pool(), MinVersion: tls.VersionTLS12}
	w := &rep.Where
	w.Front, w.URL, w.HTTPSBase = e.frontName, e.url(), "https://"+e.frontAddr
	w.ExtauthzMetrics = "http://" + gw.ExtauthzMetrics + "/metrics"
	w.BridgeMetrics = "http://" + gw.BridgeMetrics + "/metrics"
	w.Kubeconfig, w.CAFile = e.kubecfg, e.caFile
	return fmt.Sprintf("%s on %s", e.frontName, e.url()), nil
}

// close stops everything the demo started, by PID, newest first (the
// in-process Envoy stand-in of the harness too).
func (e *env) close() error {
	if e.gw != nil {
		e.gw.Close()
	}
	return e.procs.Close()
}
