// Package bench is the fixed-workload benchmark of the bridge. In
// one run on loopback, against the same reference relay and with the same
// load generator, it compares the bridge with the naive single-process
// WebSocket-to-TCP gateway it builds itself (naive.go), plain and with TLS
// in Go, and the full chain (the shipped nginx config terminating TLS in
// front of the bridge, over TCP and over a Unix socket) with the naive TLS
// gateway. Every gateway runs as a child process; the figures to trust are
// CPU seconds per GB (utime+stime from /proc of the gateway processes,
// robust to other load on a shared machine) and resident memory per idle
// registered session. Throughput and round trips are reported as ratios to
// direct TCP, with the run's steal time beside them.
package datapath

import (
	"context"
	"crypto/tls"
	"fmt"
	"github.com/wirekube/relay-ws/internal/test/procfs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wirekube/relay-ws/internal/test/refrelay"
	"github.com/wirekube/relay-ws/relayproto"
)

// Config is the workload.
type Config struct {
	Frames1400   int // Data frames each way at 1,400 bytes
	Frames16K    int // Data frames each way at 16 KiB
	Window       int // frames in flight per direction
	PingPongs    int // measured round trips
	PingPayload  int // Data payload bytes of a ping
	IdleSessions int // registered idle sessions per memory reading
	Rounds       int // interleaved rounds; each figure keeps its best round
	NoNginx      bool
}

// DefaultConfig is the workload of `make bench`.
func DefaultConfig() Config {
	return Config{Frames1400: 100000, Frames16K: 20000, Window: 64, PingPongs: 3000, PingPayload: 16,
		IdleSessions: 20000, Rounds: 2}
}

// Payload sizes of the CPU runs.
const (
	small = 1400
	large = 16 << 10
)

// proc is a gateway process whose CPU and memory count.
type proc struct {
	name string
	pid  int
	gc   func() error // nil: not a Go process
}

// path is one way to reach the relay.
type path struct {
	name  string
	url   string // "" for direct TCP
	tls   *tls.Config
	procs []proc
	idle  bool // measure memory per idle session
	salt  byte
}

// Figures are the measurements of one path.
type Figures struct {
	Procs    []string
	CPU      map[int][]float64 // payload -> CPU s/GB per process (best round)
	MBps     map[int]float64   // payload -> MB/s both ways (best round)
	P50, P99 time.Duration
	RSS      []float64 // bytes per idle session per process
	Sessions int       // idle sessions of the RSS reading
}

func (f *Figures) totalCPU(payload int) float64 {
	var t float64
	for _, c := range f.CPU[payload] {
		t += c
	}
	return t
}

func (f *Figures) totalRSS() float64 {
	var t float64
	for _, r := range f.RSS {
		t += r
	}
	return t
}

// Result is one benchmark run.
type Result struct {
	Config  Config
	Paths   map[string]*Figures
	Order   []string
	Steal   float64 // stolen share of the machine's CPU time during the run
	Elapsed time.Duration
	Note    string // what could not run (no nginx, no envoy)
}

// Path names.
const (
	pDirect   = "direct TCP"
	pBridge   = "bridge (ws)"
	pNaive    = "naive gateway (ws)"
	pForward  = "Go TCP forwarder (floor)"
	pChain    = "nginx TLS + bridge (TCP hop)"
	pChainUDS = "nginx TLS + bridge (Unix socket hop)"
	// pChainB is the TCP-hop chain again with nginxTuneBEnv's changes: a
	// lever beside the shipped file in the same interleaved rounds.
	pChainB   = "nginx TLS + bridge (TCP hop, tune B)"
	pNaiveTLS = "naive gateway (Go TLS)"
	pWireKube = "WireKube relay-ws (Go TLS)"
	// pWireKubeChain is WireKube's gateway behind the same nginx TLS front
	// as the bridge: its chart exposes it as a ClusterIP Service behind an
	// Ingress, so this is the same topology as the chain.
	pWireKubeChain = "nginx TLS + WireKube relay-ws (ws)"
)

// wireKubeEnv names a build of WireKube's own single-process gateway
// (wirekube-relay-ws: its pkg/relay/wsgateway Server and ListenAndServe)
// speaking this bench's child protocol (docs/bridge.md#benchmark says how
// it was built). When set, the bench measures it as one more path, with
// TLS in Go as it is deployed, and compares the nginx chain with it.
// Unset, its rows say "not measured": WireKube's module is not on the Go
// module proxy, so `make bench` cannot build it.
const wireKubeEnv = "WIREKUBE_BENCH_WIREKUBE_RELAY_WS"

// Run starts every gateway and runs the workload against relay.
func Run(ctx context.Context, cfg Config, relay *refrelay.Server, relayAddr string) (*Result, error) {
	start := time.Now()
	cpu0, err := procfs.MachineCPU()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "wirekube-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	paths, stop, note, err := startPaths(ctx, cfg, dir, relayAddr)
	defer stop()
	if err != nil {
		return nil, err
	}
	res := &Result{Config: cfg, Paths: map[string]*Figures{}, Note: note}
	for _, p := range paths {
		res.Order = append(res.Order, p.name)
		f := &Figures{CPU: map[int][]float64{}, MBps: map[int]float64{}}
		for _, pr := range p.procs {
			f.Procs = append(f.Procs, pr.name)
		}
		res.Paths[p.name] = f
	}
	paths = onlyPaths(paths, os.Getenv(onlyPathsEnv))
	// Rounds interleave the paths so a swing in machine load hits all.
	for round := range max(cfg.Rounds, 1) {
		for _, p := range paths {
			if err := measurePath(ctx, cfg, relay, relayAddr, p, res.Paths[p.name], round); err != nil {
				return nil, fmt.Errorf("%s: %w", p.name, err)
			}
		}
	}
	for _, p := range paths {
		if p.idle {
			if err := measureIdle(ctx, cfg, relay, p, res.Paths[p.name]); err != nil {
				return nil, fmt.Errorf("%s idle sessions: %w", p.name, err)
			}
		}
	}
	cpu1, err := procfs.MachineCPU()
	if err != nil {
		return nil, err
	}
	res.Steal, res.Elapsed = procfs.StealShare(cpu0, cpu1), time.Since(start)
	return res, nil
}

// startPaths starts the gateways: a bridge and a naive gateway (plain ws), a
// naive TLS gateway, WireKube's gateway when wireKubeEnv names a build, and
// nginx in front of a bridge over TCP, of another over a Unix socket and of
// WireKube's gateway.
func startPaths(ctx context.Context, cfg Config, dir, relayAddr string) ([]path, func(), string, error) {
	var stops []func()
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	fail := func(err error) ([]path, func(), string, error) { return nil, stop, "", err }
	cert, key, clientTLS, err := benchCert(dir)
	if err != nil {
		return fail(err)
	}
	start := func(role string, env ...string) (*child, error) {
		c, err := startChildEnv(role, relayAddr, env...)
		if err == nil {
			stops = append(stops, c.stop)
		}
		return c, err
	}
	br, err := start(roleBridge)
	if err != nil {
		return fail(err)
	}
	nv, err := start(roleNaive)
	if err != nil {
		return fail(err)
	}
	nvTLS, err := start(roleNaiveTLS, childCertEnv+"="+cert+":"+key)
	if err != nil {
		return fail(err)
	}
	paths := []path{
		{name: pDirect, salt: 10},
		{name: pBridge, url: "ws://" + br.addr + "/relay", procs: []proc{goProc("bridge", br)}, idle: true, salt: 11},
		{name: pNaive, url: "ws://" + nv.addr + "/relay", procs: []proc{goProc("naive", nv)}, idle: true, salt: 12},
		{name: pNaiveTLS, url: "wss://" + nvTLS.addr + "/relay", tls: clientTLS,
			procs: []proc{goProc("naive", nvTLS)}, idle: true, salt: 13},
	}
	wk := os.Getenv(wireKubeEnv)
	var wkPlain *child // WireKube's gateway without TLS, behind nginx
	if wk != "" {
		c, err := startWireKube(wk, relayAddr, cert+":"+key)
		if err != nil {
			return fail(err)
		}
		stops = append(stops, c.stop)
		paths = append(paths, path{name: pWireKube, url: "wss://" + c.addr + "/relay", tls: clientTLS,
			procs: []proc{goProc("relay-ws", c)}, idle: true, salt: 20})
		if wkPlain, err = startWireKube(wk, relayAddr, ""); err != nil {
			return fail(err)
		}
		stops = append(stops, wkPlain.stop)
	}
	bin := nginxBinary()
	note := "bridge without --revocation-addr (no extauthz here); no envoy binary on PATH: the Envoy chain is not measured"
	switch {
	case cfg.NoNginx:
		return paths, stop, note + "; nginx chain skipped (NoNginx)", nil
	case bin == "":
		return paths, stop, note + "; no nginx binary: the nginx chain is not measured", nil
	}
	auth, stopAuth, err := startBenchAuth()
	if err != nil {
		return fail(err)
	}
	stops = append(stops, stopAuth)
	sock := filepath.Join(dir, "bridge.sock")
	brUDS, err := start(roleBridge, childListenEnv+"=unix:"+sock)
	if err != nil {
		return fail(err)
	}
	fronted := []behind{{pChain, br.addr, "bridge", br, true, ""}, {pChainUDS, "unix:" + sock, "bridge", brUDS, false, ""}}
	if tune, env := os.Getenv(nginxTuneBEnv), os.Getenv(bridgeEnvBEnv); tune != "" || env != "" {
		brB, err := start(roleBridge, strings.Fields(env)...)
		if err != nil {
			return fail(err)
		}
		fronted = append(fronted, behind{pChainB, brB.addr, "bridge", brB, true, tune})
	}
	if wkPlain != nil {
		// The same shipped file in front of WireKube's gateway, which
		// checks the token itself: the client's Authorization passes on.
		fronted = append(fronted, behind{pWireKubeChain, wkPlain.addr, "relay-ws", wkPlain, true,
			"relay:proxy_set_header Authorization $http_authorization;"})
	}
	nginxPaths, nginxStops, err := startFronts(ctx, bin, dir, auth, cert, key, clientTLS, fronted)
	stops = append(stops, nginxStops...)
	if err != nil {
		return fail(err)
	}
	paths = append(paths, nginxPaths...)
	return paths, stop, note, nil
}

// goProc is a Go gateway child as a measured process (forced GC before a
// memory reading).
func goProc(name string, c *child) proc { return proc{name: name, pid: c.pid(), gc: c.gc} }

// behind is a gateway behind the shipped nginx front: upstream is its
// address (host:port or unix:/path), tune the path's own nginx changes.
type behind struct {
	name, upstream, role string
	gw                   *child
	idle                 bool
	tune                 string
}

// startFronts starts one nginx, as shipped, in front of each gateway and
// returns their paths and the stops of the nginx processes it started
// (also when it fails part way).
func startFronts(ctx context.Context, bin, dir, auth, cert, key string, clientTLS *tls.Config, fronted []behind) ([]path, []func(), error) {
	var paths []path
	var stops []func()
	for i, c := range fronted {
		d := filepath.Join(dir, fmt.Sprintf("nginx%d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, stops, err
		}
		n, err := startNginx(ctx, bin, d, c.upstream, auth, cert, key, c.tune)
		if err != nil {
			return nil, stops, err
		}
		stops = append(stops, n.stop)
		paths = append(paths, path{name: c.name, url: "wss://" + n.addr + "/relay", tls: clientTLS,
			procs: []proc{{name: "nginx", pid: n.pid()}, goProc(c.role, c.gw)}, idle: c.idle, salt: byte(14 + i)})
	}
	return paths, stops, nil
}

// startWireKube runs bin, a build of WireKube's gateway (wireKubeEnv); certKey
// "cert:key" makes it terminate TLS, "" serves plain ws.
func startWireKube(bin, relayAddr, certKey string) (*child, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env := []string{childListenEnv + "=" + addr}
	if certKey != "" {
		env = append(env, childCertEnv+"="+certKey)
	}
	return startChildBin(bin, roleWireKube, relayAddr, env...)
}

func (p path) dial(ctx context.Context, relayAddr string, k relayproto.Key, bufSize int) (peer, error) {
	if p.url == "" {
		c, err := dialTCP(ctx, relayAddr, k)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	ws, err := dialWS(ctx, p.url, k, bufSize, p.tls)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return ws, nil
}

// onlyPathsEnv, when set, is a comma-separated list of path name prefixes
// to measure (direct TCP is always measured): for trying one lever at a
// time without the whole run. `make bench` leaves it unset.
const onlyPathsEnv = "WIREKUBE_BENCH_ONLY"

func onlyPaths(paths []path, only string) []path {
	if only == "" {
		return paths
	}
	var out []path
	for _, p := range paths {
		keep := p.name == pDirect
		for _, prefix := range strings.Split(only, ",") {
			keep = keep || (prefix != "" && strings.HasPrefix(p.name, prefix))
		}
		if keep {
			out = append(out, p)
		}
	}
	return out
}
