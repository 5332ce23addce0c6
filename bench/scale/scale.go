// Package scale is the many-agents benchmark: a
// real kube-apiserver and etcd (internal/test/stack), Replicas gateway
// replicas each as the Pod runs it (wirekube-extauthz, wirekube-bridge on
// that extauthz's revocation stream, the shipped nginx config as the TLS
// front, each its own process; a reference relay per replica), and Agents
// agents with Pod-bound tokens (a Node, a Pod and a WireKubePeer each)
// from load generator processes following the real agent's reconnect
// policy. It measures memory and CPU per process at rest, a burst of Pod
// deletions (exactly those sessions closed, and how fast), and one replica
// SIGKILLed (its agents re-admitted on the others: time, TokenReviews,
// peak memory). Loopback only; every wait is bounded; it stops by itself.
package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/wirekube/relay-ws/internal/test/procfs"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wirekube/relay-ws/extauthz"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/render"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/relayproto"
)

// Config is the workload.
type Config struct {
	Agents    int     // live registered sessions in total
	Replicas  int     // gateway replicas
	ReviewQPS float64 // each extauthz's --kube-api-qps (the TokenReview rate)
	DrainRate float64 // each bridge's --drain-rate during the rolling update
	UnreadyAt int     // each bridge's --unready-at (0: off)
	// FullBounce is each bridge's --full-bounce: authz (the chart's with
	// Envoy, extauthz beside the bridge draws from its GET /room, given as
	// --bridge-room-url), bridge or off.
	FullBounce string
	// BridgeArgs are more flags for every bridge, after the run's own.
	BridgeArgs []string
	// OnReviewThrottled is each extauthz's --on-review-throttled (deny,
	// the default, or review-after).
	OnReviewThrottled string
	Burst             int           // Pods deleted in one burst
	PerGen            int           // agents per generator process (one descriptor each)
	Rate              float64       // agents started per second at the start, all generators together
	Settle            time.Duration // bound of each wait for agents
	RestWindow        time.Duration // CPU at rest is measured over this window
}

// fullBounce is FullBounce, authz when empty (the chart's with Envoy).
func (c Config) fullBounce() string { return cmpOr(c.FullBounce, "authz") }

// DefaultUnreadyAt is the bridges' --unready-at: the chart's
// bridge.unreadyAt (TestDefaultUnreadyAtIsTheCharts holds the two equal).
const DefaultUnreadyAt = 95

// Environment variables that size the run (`make bench` uses the
// defaults; docs/bridge.md has the full-size command).
const (
	EnvAgents = "WIREKUBE_SCALE_AGENTS"
	EnvBurst  = "WIREKUBE_SCALE_BURST"
)

// DefaultConfig is `make bench`'s size, or the sizes EnvAgents and EnvBurst
// name (the full run: 18,000 and 1,000).
func DefaultConfig() (Config, error) {
	agents, burst := 3000, 300
	for _, v := range []struct {
		env string
		dst *int
	}{{EnvAgents, &agents}, {EnvBurst, &burst}} {
		if s := os.Getenv(v.env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 30000 {
				return Config{}, fmt.Errorf("%s=%q: want a count in 1..30000", v.env, s)
			}
			*v.dst = n
		}
	}
	return SizedConfig(agents, burst)
}

// SizedConfig is the workload of agents agents and a burst of burst Pod
// deletions. The drained bridges close sessions at half the TokenReview
// rate of the replicas left serving (Replicas-1 old and the new one), so
// that the moved agents arrive at no more than a replica's share of it
// even when the Service sends most of them to one replica.
func SizedConfig(agents, burst int) (Config, error) {
	c := Config{Agents: agents, Replicas: 3, Burst: burst, PerGen: 6500, Rate: 120, RestWindow: 10 * time.Second,
		ReviewQPS: extauthz.DefaultOptions().KubeAPIQPS, OnReviewThrottled: extauthz.ThrottledDeny, UnreadyAt: DefaultUnreadyAt}
	c.DrainRate = c.ReviewQPS * float64(c.Replicas) / 2
	if agents < 1 || agents > 30000 {
		return c, fmt.Errorf("agents: want a count in 1..30000, got %d", agents)
	}
	// Each wait is bounded: five minutes beyond the ramp.
	c.Settle = 5*time.Minute + time.Duration(float64(c.Agents)/c.Rate*float64(time.Second))
	if c.Burst < 1 || c.Burst > c.Agents/2 {
		return c, fmt.Errorf("burst: want 1 to half of the %d agents, got %d", c.Agents, c.Burst)
	}
	return c, nil
}

// drainTimeout is each bridge's --drain-timeout: time for every agent to
// be closed at DrainRate, plus a margin, so no session is cut.
func (c Config) drainTimeout() time.Duration {
	return time.Duration(float64(c.Agents)/c.DrainRate*float64(time.Second)) + 30*time.Second
}

// agentSA is the agent DaemonSet's ServiceAccount (extauthz's default
// --agent-service-account).
const agentSA = "wirekube-agent"

// agent is the parent's view of one agent.
type agent struct {
	node, pod string
	key       relayproto.Key
	token     string
	replica   int // where it was sent first

	up       bool
	on       int // replica of its current session
	upAt     time.Time
	downAt   time.Time
	downCode int
	stopped  bool
	admitted int // admissions so far
}

// run is the state of one Run.
type run struct {
	cfg      Config
	out      io.Writer
	dir      string
	cluster  *stack.Cluster
	client   kubernetes.Interface
	replicas []*replica
	gens     []*generator
	// fronts are the TLS front addresses of every replica the run may
	// start (the first Replicas, then one per rolling-update step); the
	// generators know them all, as a Service's clients reach whatever
	// endpoints it has.
	fronts []string
	certs  [2]string // the fronts' certificate and key files
	bins   map[string]string
	procs  *stack.Procs
	repo   string
	kcfg   string // extauthz's kubeconfig

	mu     sync.Mutex
	agents []*agent
	fails  map[string]int // dial failures by "status reason" since failsSince
	// failsSince: only dial failures after it count (the connect phase).
	failsSince time.Time
	phase      *phase // the scenario being recorded, if any

	ep *endpoints // the Service's endpoints (endpoints.go)
}

// Run runs the whole benchmark and returns its figures.
func Run(ctx context.Context, cfg Config, out io.Writer) (*Result, error) {
	start := time.Now()
	cpu0, err := procfs.MachineCPU()
	if err != nil {
		return nil, err
	}
	res := &Result{Config: cfg, LoadStart: procfs.LoadAverage()}
	dir, err := os.MkdirTemp("", "wirekube-scale-")
	if err != nil {
		return nil, err
	}
	procs, err := stack.NewProcs(filepath.Join(dir, "logs"), out)
	if err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, out: out, dir: dir, fails: map[string]int{}, procs: procs, ep: newEndpoints()}
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { // owned: stopped and waited for below
		defer close(watched)
		r.ep.run(wctx, func(format string, a ...any) { fmt.Fprintf(out, format, a...) })
	}()
	defer func() {
		stopWatch()
		<-watched
		for _, g := range r.gens {
			g.stop()
		}
		if err := procs.Close(); err != nil {
			fmt.Fprintf(out, "scale: stopping processes: %v\n", err)
		}
		if os.Getenv("WIREKUBE_SCALE_KEEP") == "" {
			os.RemoveAll(dir)
		} else {
			fmt.Fprintf(out, "scale: logs kept in %s\n", procs.LogDir)
		}
	}()
	if err := r.setup(ctx, procs); err != nil {
		return nil, err
	}
	if err := r.connect(ctx, res); err != nil {
		return nil, err
	}
	if err := r.atRest(ctx, res); err != nil {
		return nil, err
	}
	if err := r.burst(ctx, res); err != nil {
		return nil, err
	}
	if err := r.roll(ctx, res); err != nil {
		return nil, err
	}
	if err := r.kill(ctx, res); err != nil {
		return nil, err
	}
	cpu1, err := procfs.MachineCPU()
	if err != nil {
		return nil, err
	}
	res.Steal, res.Elapsed, res.LoadEnd = procfs.StealShare(cpu0, cpu1), time.Since(start), procfs.LoadAverage()
	return res, nil
}

// setup starts the cluster, creates every agent's objects and token, and
// starts the replicas.
func (r *run) setup(ctx context.Context, procs *stack.Procs) error {
	repo, err := stack.RepoRoot()
	if err != nil {
		return err
	}
	kbins, err := stack.FindKubeBinaries(ctx, repo, r.out)
	if err != nil {
		return err
	}
	if r.cluster, err = stack.StartCluster(ctx, procs, kbins, filepath.Join(r.dir, "cluster")); err != nil {
		return err
	}
	crds, err := render.CRDs()
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if err := r.cluster.InstallCRD(ctx, crd.Data); err != nil {
			return err
		}
	}
	if err := r.cluster.EnsureNamespace(ctx, stack.Namespace); err != nil {
		return err
	}
	sa, err := r.cluster.CreateServiceAccount(ctx, stack.Namespace, agentSA)
	if err != nil {
		return err
	}
	kubeconfig, _, _, err := r.cluster.ExtauthzKubeconfig(ctx, repo)
	if err != nil {
		return err
	}
	fast := *r.cluster.Config
	fast.QPS, fast.Burst = 2000, 4000
	if r.client, err = kubernetes.NewForConfig(&fast); err != nil {
		return err
	}
	seedStart := time.Now()
	if err := r.seed(ctx, sa); err != nil {
		return err
	}
	fmt.Fprintf(r.out, "scale: %d agents' Node, Pod and WireKubePeer created in %s\n", r.cfg.Agents, time.Since(seedStart).Round(time.Second))
	bins, err := stack.BuildRepoBinaries(ctx, repo, filepath.Join(r.dir, "bin"), r.out)
	if err != nil {
		return err
	}
	r.bins, r.repo, r.kcfg = bins, repo, kubeconfig
	ca, err := stack.NewCA("wirekube-scale-front-ca")
	if err != nil {
		return err
	}
	kp, err := ca.ServerCert("wirekube-scale", frontName)
	if err != nil {
		return err
	}
	cert, key, err := kp.WriteFiles(r.dir, "front")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, "front-ca.crt"), ca.CertPEM, 0o644); err != nil {
		return err
	}
	r.certs = [2]string{cert, key}
	for range 2 * r.cfg.Replicas {
		a, err := stack.FreeAddr()
		if err != nil {
			return err
		}
		r.fronts = append(r.fronts, a)
	}
	for range r.cfg.Replicas {
		if err := r.startReplica(ctx); err != nil {
			return err
		}
	}
	return nil
}

// startReplica starts the next replica on its front address.
func (r *run) startReplica(ctx context.Context) error {
	i := len(r.replicas)
	rep, err := startReplica(ctx, r.procs, r.bins, r.dir, r.repo, r.kcfg, i, r.fronts[i], r.certs[0], r.certs[1],
		[]string{"--on-review-throttled=" + r.cfg.OnReviewThrottled},
		append([]string{"--drain-rate=" + strconv.FormatFloat(r.cfg.DrainRate, 'f', -1, 64), "--drain-timeout=" + r.cfg.drainTimeout().String(),
			"--unready-at=" + strconv.Itoa(r.cfg.UnreadyAt), "--full-bounce=" + r.cfg.fullBounce()}, r.cfg.BridgeArgs...))
	if err != nil {
		return err
	}
	r.replicas = append(r.replicas, rep)
	r.ep.add(rep)
	return nil
}

// seed creates each agent's Node, its Pod on it (spec.nodeName set: no
// scheduler runs) and the WireKubePeer of that node (extauthz admits a
// Pod-bound token only while the Pod's Node exists), and signs its
// Pod-bound token with the cluster's ServiceAccount key (what the
// TokenRequest API would issue; the API server accepts it as its own).
func (r *run) seed(ctx context.Context, sa *corev1.ServiceAccount) error {
	r.agents = make([]*agent, r.cfg.Agents)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(128)
	for i := range r.cfg.Agents {
		g.Go(func() error {
			a := &agent{node: fmt.Sprintf("scale-%05d", i), replica: i % r.cfg.Replicas}
			a.pod = "agent-" + a.node
			a.key = relayproto.Key{0x5c, byte(i >> 16), byte(i >> 8), byte(i), 0xa1}
			if _, err := r.client.CoreV1().Nodes().Create(gctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.node}},
				metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("node %s: %w", a.node, err)
			}
			pod, err := r.client.CoreV1().Pods(stack.Namespace).Create(gctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: a.pod, Labels: map[string]string{"app": "wirekube-agent"}},
				Spec: corev1.PodSpec{ServiceAccountName: agentSA, NodeName: a.node, AutomountServiceAccountToken: new(false),
					Containers: []corev1.Container{{Name: "agent", Image: "wirekube/agent:scale"}}},
			}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("pod %s: %w", a.pod, err)
			}
			if err := r.cluster.CreatePeer(gctx, a.node, a.key.Base64()); err != nil {
				return err
			}
			now := time.Now()
			a.token, err = r.cluster.SignToken(stack.SignedTokenOptions{ServiceAccount: sa, Pod: pod,
				Audience: contract.DefaultAudience, IssuedAt: now.Add(-time.Minute), Expiry: now.Add(2 * time.Hour)})
			r.agents[i] = a
			return err
		})
	}
	return g.Wait()
}

// connect starts the generators and waits until every agent is admitted.
func (r *run) connect(ctx context.Context, res *Result) error {
	res.Before = r.readRSS()
	res.RuntimeBefore = r.readRuntime(ctx)
	ngen := (r.cfg.Agents + r.cfg.PerGen - 1) / r.cfg.PerGen
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max // the generators inherit it
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	fronts := r.fronts
	start := time.Now()
	r.mu.Lock()
	r.failsSince = start // refusals while connecting, for the error below
	r.mu.Unlock()
	for gi := range ngen {
		spec := genSpec{Fronts: fronts, CAFile: filepath.Join(r.dir, "front-ca.crt"), Rate: r.cfg.Rate / float64(ngen)}
		for i := gi; i < r.cfg.Agents; i += ngen {
			a := r.agents[i]
			spec.Agents = append(spec.Agents, genAgent{I: i, Key: a.key, Token: a.token, Replica: a.replica})
		}
		b, err := json.Marshal(spec)
		if err != nil {
			return err
		}
		path := filepath.Join(r.dir, fmt.Sprintf("gen-%d.json", gi))
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return err
		}
		g, err := startGenerator(path, r.onEvent)
		if err != nil {
			return err
		}
		r.gens = append(r.gens, g)
	}
	r.ep.setGens(r.gens)
	if err := r.waitUntil(ctx, r.cfg.Settle, func() (bool, string) {
		n := r.count(func(a *agent) bool { return a.up })
		return n == r.cfg.Agents, fmt.Sprintf("%d of %d agents admitted", n, r.cfg.Agents)
	}); err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		return fmt.Errorf("connect: %w; refused dials by [status reason]: %v", err, r.fails)
	}
	res.ConnectTime = time.Since(start)
	res.Generators = ngen
	return nil
}

func (r *run) onEvent(ev event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.agent < 0 || ev.agent >= len(r.agents) {
		return
	}
	a := r.agents[ev.agent]
	if r.phase != nil {
		r.phase.onEvent(ev)
	}
	switch ev.kind {
	case evUp:
		a.up, a.upAt = true, ev.at
		a.admitted++
		if len(ev.fields) > 0 {
			a.on, _ = strconv.Atoi(ev.fields[0])
		}
	case evDown:
		a.up, a.downAt = false, ev.at
		if len(ev.fields) > 0 {
			a.downCode, _ = strconv.Atoi(ev.fields[0])
		}
	case evStop:
		a.stopped = true
	case evFail:
		if !r.failsSince.IsZero() && ev.at.After(r.failsSince) {
			r.fails[fmt.Sprint(ev.fields)]++
		}
	}
}

func (r *run) count(f func(*agent) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, a := range r.agents {
		if f(a) {
			n++
		}
	}
	return n
}

// waitUntil polls cond every 100 ms until it holds or within passes.
func (r *run) waitUntil(ctx context.Context, within time.Duration, cond func() (bool, string)) error {
	deadline := time.Now().Add(within)
	lastLog := time.Now()
	for {
		ok, state := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %s", within, state)
		}
		if time.Since(lastLog) > 15*time.Second {
			fmt.Fprintf(r.out, "scale: %s\n", state)
			lastLog = time.Now()
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// allProcs lists every process a figure reports, by name.
func (r *run) allProcs() []procRow {
	var out []procRow
	for _, rep := range r.replicas {
		for _, np := range rep.procs() {
			out = append(out, procRow{name: fmt.Sprintf("%s-%d", np.role, rep.i), role: np.role, replica: rep.i, pid: np.p.PID(),
				killed: rep.killed && np.role != "relay"})
		}
	}
	for i, g := range r.gens {
		out = append(out, procRow{name: fmt.Sprintf("generator-%d", i), role: "generator", replica: -1, pid: g.pid()})
	}
	if r.cluster != nil {
		out = append(out, procRow{name: "kube-apiserver", role: "kube-apiserver", replica: -1, pid: r.cluster.APIServer.PID()},
			procRow{name: "etcd", role: "etcd", replica: -1, pid: r.cluster.Etcd.PID()})
	}
	return out
}

type procRow struct {
	name, role string
	replica    int
	pid        int
	killed     bool
}

func (r *run) readRSS() map[string]int64 {
	out := map[string]int64{}
	for _, p := range r.allProcs() {
		if p.killed {
			continue
		}
		if v, err := procfs.StatusBytes(p.pid, "VmRSS"); err == nil {
			out[p.name] = v
		}
	}
	return out
}

// runtimeMetrics are the Go runtime figures the binaries export (their
// /metrics has the Go collector): where a session's memory goes.
var runtimeMetrics = []string{"go_goroutines", "go_memstats_stack_inuse_bytes", "go_memstats_heap_inuse_bytes"}

// readRuntime reads runtimeMetrics of every bridge and extauthz, by
// process name.
func (r *run) readRuntime(ctx context.Context) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, rep := range r.replicas {
		if rep.killed {
			continue
		}
		for role, addr := range map[string]string{"bridge": rep.bridgeMetrics, "extauthz": rep.metrics} {
			m := map[string]float64{}
			for _, name := range runtimeMetrics {
				if v, err := metric(ctx, addr, name); err == nil {
					m[name] = v
				}
			}
			out[fmt.Sprintf("%s-%d", role, rep.i)] = m
		}
	}
	return out
}

// atRest: memory per process with every agent connected, and CPU per
// process over RestWindow (keepalives and pings only).
func (r *run) atRest(ctx context.Context, res *Result) error {
	if err := sleepCtx(ctx, 5*time.Second); err != nil { // let the connect phase's garbage settle
		return err
	}
	res.Sessions = map[int]int{}
	r.mu.Lock()
	for _, a := range r.agents {
		if a.up {
			res.Sessions[a.on]++
		}
	}
	r.mu.Unlock()
	cpu0 := map[string]float64{}
	for _, p := range r.allProcs() {
		cpu0[p.name], _ = procfs.CPUSeconds(p.pid)
	}
	if err := sleepCtx(ctx, r.cfg.RestWindow); err != nil {
		return err
	}
	res.RestCPU = map[string]float64{}
	for _, p := range r.allProcs() {
		c, _ := procfs.CPUSeconds(p.pid)
		res.RestCPU[p.name] = (c - cpu0[p.name]) / r.cfg.RestWindow.Seconds()
	}
	res.Rest = r.readRSS()
	res.RuntimeRest = r.readRuntime(ctx)
	res.Procs = r.allProcs()
	return nil
}

// burst deletes Burst agents' Pods at once (force, as without a kubelet)
// and waits until exactly those sessions are closed.
func (r *run) burst(ctx context.Context, res *Result) error {
	step := r.cfg.Agents / r.cfg.Burst
	var victims []int
	for i := 0; len(victims) < r.cfg.Burst; i += step {
		victims = append(victims, i)
	}
	isVictim := map[int]bool{}
	for _, v := range victims {
		isVictim[v] = true
	}
	zero := int64(0)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	first := time.Now()
	var mu sync.Mutex
	var last time.Time
	for _, v := range victims {
		g.Go(func() error {
			err := r.client.CoreV1().Pods(stack.Namespace).Delete(gctx, r.agents[v].pod, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			mu.Lock()
			last = time.Now()
			mu.Unlock()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	err := r.waitUntil(ctx, 30*time.Second, func() (bool, string) {
		n := r.count(func(a *agent) bool { return a.stopped })
		return n >= len(victims), fmt.Sprintf("%d of %d revoked sessions closed", n, len(victims))
	})
	if err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	if err := sleepCtx(ctx, 2*time.Second); err != nil { // any wrong close would show by now
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b := &res.Burst
	b.Deleted, b.DeleteTook = len(victims), last.Sub(first)
	for i, a := range r.agents {
		closed := !a.downAt.IsZero() && a.downAt.After(first)
		switch {
		case isVictim[i] && a.stopped:
			b.Closed++
			b.LastClose = max(b.LastClose, a.downAt.Sub(last))
			b.LastCloseFromFirst = max(b.LastCloseFromFirst, a.downAt.Sub(first))
		case !isVictim[i] && closed:
			b.OthersClosed++
		}
	}
	return nil
}

// kill SIGKILLs one live replica's nginx, extauthz and bridge (the Pod)
// and waits until every agent it had is admitted on the others.
func (r *run) kill(ctx context.Context, res *Result) error {
	victim, survivors := r.pickVictim()
	fmt.Fprintf(r.out, "scale: SIGKILL replica %d (%d sessions)\n", victim.i, r.count(func(a *agent) bool { return a.up && a.on == victim.i }))
	var moved []int
	r.mu.Lock()
	for i, a := range r.agents {
		if a.up && a.on == victim.i {
			moved = append(moved, i)
		}
	}
	r.mu.Unlock()
	reviews0 := map[int]float64{}
	for _, rep := range survivors {
		v, err := metric(ctx, rep.metrics, "wirekube_extauthz_token_reviews_total")
		if err != nil {
			return err
		}
		reviews0[rep.i] = v
	}
	for _, p := range r.allProcs() {
		_ = procfs.ResetPeak(p.pid)
	}
	ph, err := r.beginPhase(ctx)
	if err != nil {
		return err
	}
	killAt := ph.start
	for _, p := range []*stack.Proc{victim.nginx, victim.extauthz, victim.bridge} {
		if err := p.Signal(syscall.SIGKILL); err != nil {
			return err
		}
	}
	victim.killed = true
	if err := r.ep.terminate(victim.i); err != nil {
		return err
	}
	k := &res.Kill
	k.Agents = len(moved)
	readmitted := func() (int, time.Time) {
		r.mu.Lock()
		defer r.mu.Unlock()
		n, lastUp := 0, time.Time{}
		for _, i := range moved {
			if a := r.agents[i]; a.up && a.upAt.After(killAt) {
				n++
				lastUp = maxTime(lastUp, a.upAt)
			}
		}
		return n, lastUp
	}
	// The wait ends when all are back, or when none was admitted for
	// stallAfter (longer than the agent's 30 s backoff cap): the survivors
	// are full (--max-sessions) and the rest are refused at_capacity.
	const stallAfter = 45 * time.Second
	lastN, lastProgress := 0, time.Now()
	err = r.waitUntil(ctx, r.cfg.Settle, func() (bool, string) {
		n, _ := readmitted()
		if n != lastN {
			lastN, lastProgress = n, time.Now()
		}
		stalled := time.Since(lastProgress) > stallAfter
		k.Stalled = stalled && n < len(moved)
		return n == len(moved) || stalled, fmt.Sprintf("%d of %d agents of the killed replica re-admitted", n, len(moved))
	})
	n, lastUp := readmitted()
	k.Readmitted = n
	if !lastUp.IsZero() {
		k.LastAdmission = lastUp.Sub(killAt)
	}
	k.TimedOut = err != nil
	for _, rep := range survivors {
		v, err := metric(ctx, rep.metrics, "wirekube_extauthz_token_reviews_total")
		if err != nil {
			return err
		}
		k.TokenReviews += int(v - reviews0[rep.i])
	}
	k.Peak = map[string]int64{}
	for _, p := range r.allProcs() {
		if p.killed {
			continue
		}
		if v, err := procfs.StatusBytes(p.pid, "VmHWM"); err == nil {
			k.Peak[p.name] = v
		}
	}
	if k.Phase, err = r.endPhase(ctx, ph); err != nil {
		return err
	}
	k.Phase.LastBack, k.Phase.ServingReplicas = k.LastAdmission, len(survivors)
	k.Phase.ReviewRate = r.cfg.ReviewQPS * float64(len(survivors))
	k.Phase.SessionsPerReplica0 = len(moved)
	k.Fails = maps(k.Phase.Fails)
	return nil
}

// pickVictim is the live replica with the most sessions whose agents,
// split evenly over the others, the survivors can hold under this
// machine's descriptor limit (maxSessionsPerReplica each; a loss beyond it
// would measure at_capacity, not the admission path), else the one that
// leaves the fullest survivor least full.
func (r *run) pickVictim() (*replica, []*replica) {
	load := map[int]int{}
	r.mu.Lock()
	for _, a := range r.agents {
		if a.up {
			load[a.on]++
		}
	}
	r.mu.Unlock()
	var live []*replica
	for _, rep := range r.replicas {
		if !rep.killed {
			live = append(live, rep)
		}
	}
	peakAfter := func(v *replica) int {
		peak := 0
		for _, s := range live {
			if s != v {
				peak = max(peak, load[s.i]+load[v.i]/(len(live)-1))
			}
		}
		return peak
	}
	best := -1
	for k, v := range live {
		fits := peakAfter(v) <= maxSessionsPerReplica
		switch {
		case best < 0:
			best = k
		case fits && (peakAfter(live[best]) > maxSessionsPerReplica || load[v.i] > load[live[best].i]):
			best = k
		case !fits && peakAfter(live[best]) > maxSessionsPerReplica && peakAfter(v) < peakAfter(live[best]):
			best = k
		}
	}
	return live[best], append(slices.Clone(live[:best]), live[best+1:]...)
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
