// Package bench is the fixed-workload benchmark of the bridge (issue 2,
// section 5). It compares, in one run on loopback, clients talking to the
// reference relay directly over TCP with clients going through the bridge
// (plain ws, no TLS), and measures the bridge's memory per idle session.
package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/wirekube/relay-ws/internal/refrelay"
	"github.com/wirekube/relay-ws/relayproto"
)

// Config is the workload. Zero fields take the defaults of DefaultConfig.
type Config struct {
	Frames       int // Data frames each way in the throughput run
	Payload      int // Data payload bytes in the throughput run
	Window       int // frames in flight per direction
	PingPongs    int // measured round trips
	PingPayload  int // Data payload bytes of a ping
	IdleSessions int // registered idle sessions for the memory reading
	Rounds       int // direct/bridge rounds, alternating; the best of each is kept
}

// DefaultConfig is the workload of `make bench`.
func DefaultConfig() Config {
	return Config{Frames: 30000, Payload: 1400, Window: 64, PingPongs: 3000, PingPayload: 16, IdleSessions: 5000, Rounds: 2}
}

// Path is the measurements of one way to reach the relay.
type Path struct {
	MBps     float64 // payload MB/s, both directions together
	P50, P99 time.Duration
}

// Result is one benchmark run.
type Result struct {
	Config Config
	// Direct is clients -> relay; Bridge is clients -> bridge -> relay with
	// the bridge in this process, like the relay (the like-for-like
	// comparison); BridgeProcess has the bridge in its own process, which
	// adds cross-process wake-ups on a busy machine.
	Direct, Bridge, BridgeProcess Path
	// Memory of the bridge process per idle registered session: the growth
	// of VmRSS and of Go heap+stack in use between before and after opening
	// the sessions, divided by their number, measured after a forced GC
	// (RSSGC, GoGC) and as found (RSSRaw).
	RSSRaw, RSSGC, GoGC float64
}

// Run starts the reference relay in this process and the bridge in a
// child process, then runs the workload.
func Run(ctx context.Context, cfg Config, relay *refrelay.Server, relayAddr string) (Result, error) {
	res := Result{Config: cfg}
	br, err := startChild(relayAddr)
	if err != nil {
		return res, err
	}
	defer br.stop()
	url := "ws://" + br.addr + "/relay"
	inURL, stop, err := startInProcess(relayAddr)
	if err != nil {
		return res, err
	}
	defer stop()

	paths := []struct {
		name string
		dst  *Path
		dial func(relayproto.Key) (peer, error)
	}{
		{"direct", &res.Direct, func(k relayproto.Key) (peer, error) { return dialTCP(ctx, relayAddr, k) }},
		{"bridge", &res.Bridge, func(k relayproto.Key) (peer, error) { return dialWS(ctx, inURL, k, 0) }},
		{"bridge process", &res.BridgeProcess, func(k relayproto.Key) (peer, error) { return dialWS(ctx, url, k, 0) }},
	}
	// Rounds alternate the paths so a swing in machine load hits all of
	// them; each path keeps its best round.
	for round := range max(cfg.Rounds, 1) {
		for i, p := range paths {
			m, err := measurePath(ctx, cfg, relay, p.dial, byte(10+len(paths)*round+i))
			if err != nil {
				return res, fmt.Errorf("%s: %w", p.name, err)
			}
			*p.dst = best(*p.dst, m, round)
		}
	}
	if err := measureIdle(ctx, cfg, relay, br, url, &res); err != nil {
		return res, fmt.Errorf("idle sessions: %w", err)
	}
	return res, nil
}

// measurePath runs the throughput and ping-pong workloads over two peers.
func measurePath(ctx context.Context, cfg Config, relay *refrelay.Server,
	dial func(relayproto.Key) (peer, error), salt byte) (Path, error) {
	var p Path
	ka, kb := benchKey(salt, 1), benchKey(salt, 2)
	a, b, err := dialPair(ctx, relay, dial, ka, kb)
	if err != nil {
		return p, err
	}
	defer a.close()
	defer b.close()
	if p.MBps, err = throughput(a, b, ka, kb, cfg.Frames, cfg.Payload, cfg.Window); err != nil {
		return p, err
	}
	rtts, err := pingPong(a, b, ka, kb, cfg.PingPongs, cfg.PingPongs/10, cfg.PingPayload)
	if err != nil {
		return p, fmt.Errorf("ping-pong: %w", err)
	}
	p.P50, p.P99 = percentile(rtts, 0.50), percentile(rtts, 0.99)
	return p, nil
}

// best keeps the higher rate and the lower round trip times.
func best(prev, cur Path, round int) Path {
	if round == 0 {
		return cur
	}
	return Path{MBps: max(prev.MBps, cur.MBps), P50: min(prev.P50, cur.P50), P99: min(prev.P99, cur.P99)}
}

func dialPair(ctx context.Context, relay *refrelay.Server, dial func(relayproto.Key) (peer, error),
	ka, kb relayproto.Key) (peer, peer, error) {
	a, err := dial(ka)
	if err != nil {
		return nil, nil, err
	}
	b, err := dial(kb)
	if err != nil {
		a.close()
		return nil, nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, k := range []relayproto.Key{ka, kb} {
		if err := relay.WaitRegistered(wctx, k); err != nil {
			a.close()
			b.close()
			return nil, nil, fmt.Errorf("register %s: %w", k, err)
		}
	}
	return a, b, nil
}

func benchKey(salt byte, i int) relayproto.Key {
	var k relayproto.Key
	k[0], k[1], k[2], k[3] = salt, byte(i>>16), byte(i>>8), byte(i)
	return k
}

// measureIdle opens cfg.IdleSessions registered sessions through the bridge
// and reads the bridge's memory before and after.
func measureIdle(ctx context.Context, cfg Config, relay *refrelay.Server, br *child, url string, res *Result) error {
	// Warm the bridge's pools and the runtime with a few sessions first.
	if err := openIdle(ctx, relay, url, 3, 50, func(peer) {}); err != nil {
		return err
	}
	settle := func() (rss, gomem int64, err error) {
		time.Sleep(500 * time.Millisecond)
		if err := br.gc(); err != nil {
			return 0, 0, err
		}
		if rss, err = br.rss(); err != nil {
			return 0, 0, err
		}
		gomem, err = br.goMemory()
		return rss, gomem, err
	}
	rss0, go0, err := settle()
	if err != nil {
		return err
	}
	var peers []peer
	defer func() {
		for _, p := range peers {
			p.close()
		}
	}()
	if err := openIdle(ctx, relay, url, 4, cfg.IdleSessions, func(p peer) { peers = append(peers, p) }); err != nil {
		return err
	}
	time.Sleep(time.Second)
	rawRSS, err := br.rss()
	if err != nil {
		return err
	}
	rss1, go1, err := settle()
	if err != nil {
		return err
	}
	n := float64(cfg.IdleSessions)
	res.RSSRaw, res.RSSGC, res.GoGC = float64(rawRSS-rss0)/n, float64(rss1-rss0)/n, float64(go1-go0)/n
	return nil
}

// openIdle opens n registered sessions (salt tells the key sets apart),
// handing each to keep, or closing them all at the end when keep ignores
// them (the warm-up).
func openIdle(ctx context.Context, relay *refrelay.Server, url string, salt byte, n int, keep func(peer)) error {
	peers := make([]peer, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			p, err := dialWS(gctx, url, benchKey(salt, i), 1024)
			peers[i] = p
			return err
		})
	}
	err := g.Wait()
	if err == nil {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err = relay.WaitRegistered(wctx, benchKey(salt, n-1))
		for i := 0; err == nil && i < n; i++ {
			err = relay.WaitRegistered(wctx, benchKey(salt, i))
		}
	}
	for _, p := range peers {
		if p == nil {
			continue
		}
		if salt == 3 || err != nil {
			p.close()
		} else {
			keep(p)
		}
	}
	return err
}

// Print writes the report.
func (r Result) Print(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "bridge benchmark (loopback, reference relay; %d x %d-byte Data each way, window %d; %d pings of %d bytes; best of %d alternating rounds)\n",
		c.Frames, c.Payload, c.Window, c.PingPongs, c.PingPayload, max(c.Rounds, 1))
	fmt.Fprintf(w, "  %-27s %10s %10s %10s\n", "path", "MB/s", "p50 RTT", "p99 RTT")
	for _, row := range []struct {
		name string
		p    Path
	}{{"(a) direct TCP", r.Direct}, {"(b) through bridge (ws)", r.Bridge}, {"(b') bridge in own process", r.BridgeProcess}} {
		fmt.Fprintf(w, "  %-27s %10.1f %10s %10s\n", row.name, row.p.MBps, us(row.p.P50), us(row.p.P99))
	}
	fmt.Fprintf(w, "  throughput ratio b/a: %.2f (goal >= 0.90); b'/a: %.2f\n",
		r.Bridge.MBps/r.Direct.MBps, r.BridgeProcess.MBps/r.Direct.MBps)
	fmt.Fprintf(w, "  p50 RTT added by the bridge: %s (goal < 100us); p99 added: %s; b' p50 added: %s\n",
		us(r.Bridge.P50-r.Direct.P50), us(r.Bridge.P99-r.Direct.P99), us(r.BridgeProcess.P50-r.Direct.P50))
	fmt.Fprintf(w, "  bridge memory per idle registered session (%d sessions): RSS %.1f KiB after GC, %.1f KiB as found; Go heap+stacks %.1f KiB (goal <= 16 KiB)\n",
		c.IdleSessions, r.RSSGC/1024, r.RSSRaw/1024, r.GoGC/1024)
}

func us(d time.Duration) string { return fmt.Sprintf("%.0fus", float64(d)/float64(time.Microsecond)) }
