// Package recovery measures what agents feel when a component of the
// gateway restarts: N agents following the real agent's
// reconnect policy (testagent.Reconnector), in pairs exchanging Data frames,
// talk through a TCP front to two in-process bridges in front of an
// in-process reference relay. Two scenarios: the relay restarts (down for
// Outage), and one bridge drains (SIGTERM's path: Run's context ends). The
// result is the distribution of the per-agent data-path downtime. Loopback
// only, bounded in time and count.
package recovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/bridge"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/refrelay"
	"github.com/wirekube/relay-ws/internal/test/testagent"
	"github.com/wirekube/relay-ws/relayproto"
)

// Config is the workload.
type Config struct {
	Agents   int           // even: agents are paired
	Interval time.Duration // Data frame period of each agent
	Outage   time.Duration // relay downtime
	Drain    time.Duration // the drained bridge's --drain-timeout
	Settle   time.Duration // bound for every wait (connect, recover)
}

// DefaultConfig is `make bench`'s workload.
func DefaultConfig() Config {
	return Config{Agents: 1000, Interval: 250 * time.Millisecond, Outage: 3 * time.Second, Drain: 4 * time.Second, Settle: 90 * time.Second}
}

// Downtimes is the per-agent data-path downtime of one scenario.
type Downtimes struct {
	Agents                 int
	Affected               int // agents that saw a gap at all
	P50, P90, P99, Max     time.Duration
	Refused, FalseConnects int // refused dials, false "connected"
}

// Result is one run.
type Result struct {
	Config       Config
	RelayRestart Downtimes
	BridgeDrain  Downtimes
}

// Print writes the figures.
func (r Result) Print(w io.Writer) {
	fmt.Fprintf(w, "recovery, %d agents (pairs exchanging a frame every %s), agent reconnect policy 1,2,4.. s:\n", r.Config.Agents, r.Config.Interval)
	for _, row := range []struct {
		name string
		d    Downtimes
	}{{fmt.Sprintf("relay restart (down %s)", r.Config.Outage), r.RelayRestart},
		{fmt.Sprintf("bridge drain (2 bridges, --drain-timeout %s)", r.Config.Drain), r.BridgeDrain}} {
		fmt.Fprintf(w, "  %-48s data path down p50 %6s p90 %6s p99 %6s max %6s; %d/%d agents cut, %d refused dials, %d false connects\n",
			row.name, round(row.d.P50), round(row.d.P90), round(row.d.P99), round(row.d.Max), row.d.Affected, row.d.Agents,
			row.d.Refused, row.d.FalseConnects)
	}
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

// Run runs both scenarios, each on a fresh gateway.
func Run(ctx context.Context, cfg Config) (Result, error) {
	res := Result{Config: cfg}
	var err error
	if res.RelayRestart, err = runScenario(ctx, cfg, relayRestart); err != nil {
		return res, fmt.Errorf("relay restart: %w", err)
	}
	if res.BridgeDrain, err = runScenario(ctx, cfg, bridgeDrain); err != nil {
		return res, fmt.Errorf("bridge drain: %w", err)
	}
	return res, nil
}

type scenario func(ctx context.Context, g *gateway, cfg Config) error

func relayRestart(ctx context.Context, g *gateway, cfg Config) error {
	g.stopRelay()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(cfg.Outage):
	}
	return g.startRelay()
}

func bridgeDrain(_ context.Context, g *gateway, _ Config) error {
	g.stopBridge(0) // returns when its drain is over
	return nil
}

// runScenario connects the agents, waits until every pair exchanges
// frames, runs the fault and waits until every pair does again.
func runScenario(ctx context.Context, cfg Config, fault scenario) (Downtimes, error) {
	g, err := startGateway(cfg)
	if err != nil {
		return Downtimes{}, err
	}
	defer g.close()
	agents, stop, err := runAgents(ctx, cfg, g.frontAddr)
	defer stop()
	if err != nil {
		return Downtimes{}, fmt.Errorf("before the fault: %w", err)
	}
	start := time.Now()
	if err := fault(ctx, g, cfg); err != nil {
		return Downtimes{}, err
	}
	if err := waitFlowing(ctx, agents, time.Now(), cfg.Settle); err != nil {
		return Downtimes{}, fmt.Errorf("after the fault: %w", err)
	}
	stop()
	return summarize(agents, start), nil
}

func newAgents(cfg Config, front string) []*testagent.Reconnector {
	keys := make([]relayproto.Key, cfg.Agents)
	for i := range keys {
		keys[i] = relayproto.Key{byte(i >> 8), byte(i), 0xbe, 0xef}
	}
	out := make([]*testagent.Reconnector, cfg.Agents)
	for i := range out {
		h := identityHeader(fmt.Sprintf("bench-node-%d", i), keys[i])
		out[i] = &testagent.Reconnector{
			Options: testagent.Options{URL: "ws://" + front + contract.DefaultRelayPath, Header: h, KeepaliveInterval: -1},
			Key:     keys[i], Peer: keys[i^1], Interval: cfg.Interval, GapAfter: 2 * cfg.Interval,
		}
	}
	return out
}

// identityHeader is what the proxy would set after ext_authz (the bench
// has no proxy: the front only splices TCP).
func identityHeader(peer string, k relayproto.Key) map[string][]string {
	return map[string][]string{
		contract.HeaderPeer:         {peer},
		contract.HeaderPublicKey:    {k.Base64()},
		contract.HeaderIdentity:     {"system:serviceaccount:wirekube-system:" + peer},
		contract.HeaderTokenExpires: {time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
	}
}

func waitFlowing(ctx context.Context, agents []*testagent.Reconnector, since time.Time, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		behind := 0
		for _, a := range agents {
			if !a.Report().LastPeer.After(since) {
				behind++
			}
		}
		if behind == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d agents without a peer frame within %s", behind, len(agents), within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func summarize(agents []*testagent.Reconnector, since time.Time) Downtimes {
	d := Downtimes{Agents: len(agents)}
	var gaps []time.Duration
	for _, a := range agents {
		r := a.Report()
		g := r.LongestGapSince(since)
		gaps = append(gaps, g)
		if g > 0 {
			d.Affected++
		}
		d.FalseConnects += r.FalseConnected()
		for _, dial := range r.Dials {
			if dial.At.After(since) {
				d.Refused++
			}
		}
	}
	slices.Sort(gaps)
	pick := func(q float64) time.Duration { return gaps[min(len(gaps)-1, int(q*float64(len(gaps))))] }
	d.P50, d.P90, d.P99, d.Max = pick(0.50), pick(0.90), pick(0.99), gaps[len(gaps)-1]
	return d
}

// gateway is the reference relay, two bridges and a TCP front.
type gateway struct {
	relayAddr, frontAddr string
	relayStop            context.CancelFunc
	relayDone            chan error
	bridges              []*runningBridge
	front                *tcpFront
}

type runningBridge struct {
	stop context.CancelFunc
	done chan error
	addr string
}

func startGateway(cfg Config) (*gateway, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g := &gateway{relayAddr: ln.Addr().String()}
	if err := g.serveRelay(ln); err != nil {
		return nil, err
	}
	var addrs []string
	for range 2 {
		b, err := startBridge(g.relayAddr, cfg)
		if err != nil {
			g.close()
			return nil, err
		}
		g.bridges = append(g.bridges, b)
		addrs = append(addrs, b.addr)
	}
	if g.front, err = startFront(addrs); err != nil {
		g.close()
		return nil, err
	}
	g.frontAddr = g.front.addr
	return g, nil
}

func (g *gateway) serveRelay(ln net.Listener) error {
	srv, err := refrelay.New(refrelay.Options{DisableUDP: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		ln.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.relayStop, g.relayDone = cancel, make(chan error, 1)
	go func() { g.relayDone <- srv.Serve(ctx, ln) }() // owned: stopRelay waits
	return nil
}

func (g *gateway) stopRelay() {
	if g.relayStop != nil {
		g.relayStop()
		<-g.relayDone
		g.relayStop = nil
	}
}

func (g *gateway) startRelay() error {
	ln, err := net.Listen("tcp", g.relayAddr)
	if err != nil {
		return fmt.Errorf("relay restart on %s: %w", g.relayAddr, err)
	}
	return g.serveRelay(ln)
}

func startBridge(relayAddr string, cfg Config) (*runningBridge, error) {
	return startBridgeOn("127.0.0.1:0", relayAddr, cfg, nil)
}

// startBridgeOn starts a bridge listening on addr; mod, if set, changes
// its options.
func startBridgeOn(addr, relayAddr string, cfg Config, mod func(*bridge.Options)) (*runningBridge, error) {
	o := bridge.DefaultOptions()
	o.RelayAddr, o.MetricsListen, o.DrainTimeout = relayAddr, "", cfg.Drain
	if mod != nil {
		mod(&o)
	}
	o.RevocationAddr = ""   // no extauthz here (and no binding header)
	o.IdentityKeysFile = "" // nor a signature: the bench sets the identity headers itself
	c, err := o.Complete()
	if err != nil {
		return nil, err
	}
	srv, err := bridge.New(c, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &runningBridge{stop: cancel, done: make(chan error, 1), addr: ln.Addr().String()}
	go func() { b.done <- srv.Run(ctx, ln, nil) }() // owned: stopBridge waits
	return b, nil
}

func (g *gateway) stopBridge(i int) {
	if b := g.bridges[i]; b != nil && b.stop != nil {
		b.stop()
		<-b.done
		b.stop = nil
	}
}

func (g *gateway) close() {
	if g.front != nil {
		g.front.close()
	}
	for i := range g.bridges {
		g.stopBridge(i)
	}
	g.stopRelay()
}

// tcpFront is the front with two upstreams: round robin, and on a refused
// connect the other upstream (what nginx's proxy_next_upstream and the
// Envoy config's retry_on connect-failure do), then a byte splice.
type tcpFront struct {
	ln       net.Listener
	addr     string
	backends []string
	mu       sync.Mutex
	next     int
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

func startFront(backends []string) (*tcpFront, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &tcpFront{ln: ln, addr: ln.Addr().String(), backends: backends, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept() // owned: close waits
	return f, nil
}

func (f *tcpFront) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go f.splice(c) // owned: close closes the conns and waits
	}
}

func (f *tcpFront) splice(c net.Conn) {
	defer f.wg.Done()
	up, err := f.dial()
	if err != nil {
		c.Close()
		return
	}
	if !f.track(c, up) {
		return
	}
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(*net.TCPConn); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	<-done
	f.untrack(c, up)
}

func (f *tcpFront) dial() (net.Conn, error) {
	f.mu.Lock()
	first := f.next
	f.next++
	f.mu.Unlock()
	var errs []error
	for i := range f.backends {
		up, err := net.DialTimeout("tcp", f.backends[(first+i)%len(f.backends)], time.Second)
		if err == nil {
			return up, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func (f *tcpFront) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *tcpFront) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(f.conns, c)
	}
}

func (f *tcpFront) close() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}

// OutageRow is the relay-restart downtime for one outage length.
type OutageRow struct {
	Outage time.Duration
	Down   Downtimes
}

// RunOutages runs the relay-restart scenario once per outage
// (3, 15 and 40 s with the default --relay-wait), each on a fresh
// gateway.
func RunOutages(ctx context.Context, cfg Config, outages []time.Duration) ([]OutageRow, error) {
	var rows []OutageRow
	for _, o := range outages {
		c := cfg
		c.Outage = o
		d, err := runScenario(ctx, c, relayRestart)
		if err != nil {
			return rows, fmt.Errorf("relay down %s: %w", o, err)
		}
		rows = append(rows, OutageRow{Outage: o, Down: d})
	}
	return rows, nil
}

// PrintOutages writes the rows with the cost beyond the outage.
func PrintOutages(w io.Writer, agents int, rows []OutageRow) {
	fmt.Fprintf(w, "relay outage vs. data path down, %d agents, default --relay-wait, agent reconnect policy 1,2,4.. s:\n", agents)
	for _, r := range rows {
		fmt.Fprintf(w, "  relay down %6s: data path down p50 %6s p99 %6s max %6s (max beyond the outage %6s); %d refused dials, %d false connects\n",
			r.Outage, round(r.Down.P50), round(r.Down.P99), round(r.Down.Max), round(r.Down.Max-r.Outage),
			r.Down.Refused, r.Down.FalseConnects)
	}
}

// runAgents starts cfg's agents against addr and waits until every pair
// exchanges frames; stop ends them and waits (call it whatever the error;
// a second call does nothing).
func runAgents(ctx context.Context, cfg Config, addr string) ([]*testagent.Reconnector, func(), error) {
	agents := newAgents(cfg, addr)
	actx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Add(1)
		go func() { defer wg.Done(); a.Run(actx) }()
	}
	stop := sync.OnceFunc(func() { cancel(); wg.Wait() })
	return agents, stop, waitFlowing(ctx, agents, time.Now(), cfg.Settle)
}
