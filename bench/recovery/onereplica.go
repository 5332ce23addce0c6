package recovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/wirekube/relay-ws/bridge"
)

// OneReplica is a single-replica Pod replacement (a Pod deletion, an
// eviction or a node drain with replicas: 1): the only bridge drains while
// its replacement, a new Pod on another address, becomes ready Startup
// after the drain began. The same workload runs twice: with
// the drain order of a bridge that cannot know whether its sessions have
// somewhere to go (no --drain-peers: closes spread over half of
// --drain-timeout), and with --drain-peers (sessions held until the
// replacement is ready, bridge/handover.go).
type OneReplica struct {
	Config  Config
	Startup time.Duration
	Spread  Downtimes // no --drain-peers
	Hold    Downtimes // --drain-peers
}

// RunOneReplica runs both drain orders, each on a fresh gateway.
func RunOneReplica(ctx context.Context, cfg Config, startup time.Duration) (OneReplica, error) {
	res := OneReplica{Config: cfg, Startup: startup}
	var err error
	if res.Spread, err = runOneReplica(ctx, cfg, startup, false); err != nil {
		return res, fmt.Errorf("one replica, spread: %w", err)
	}
	if res.Hold, err = runOneReplica(ctx, cfg, startup, true); err != nil {
		return res, fmt.Errorf("one replica, --drain-peers: %w", err)
	}
	return res, nil
}

// Print writes both rows.
func (r OneReplica) Print(w io.Writer) {
	fmt.Fprintf(w, "one replica replaced (drain %s, replacement ready %s after SIGTERM), %d agents:\n", r.Config.Drain, r.Startup, r.Config.Agents)
	for _, row := range []struct {
		name string
		d    Downtimes
	}{{"closes spread (no --drain-peers)", r.Spread}, {"sessions held until a replica is ready (--drain-peers)", r.Hold}} {
		fmt.Fprintf(w, "  %-56s data path down p50 %6s p99 %6s max %6s; %d refused dials, %d false connects\n",
			row.name, round(row.d.P50), round(row.d.P99), round(row.d.Max), row.d.Refused, row.d.FalseConnects)
	}
}

// replacementIP is what the fake headless Service answers once the
// replacement is ready (TEST-NET-1: never one of this host's addresses).
const replacementIP = "192.0.2.2"

func runOneReplica(ctx context.Context, cfg Config, startup time.Duration, aware bool) (Downtimes, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Downtimes{}, err
	}
	g := &gateway{relayAddr: ln.Addr().String()}
	if err := g.serveRelay(ln); err != nil {
		return Downtimes{}, err
	}
	defer g.close()
	// The replacement's address, free until it starts: the front's dials
	// there are refused meanwhile, as a Service without a ready endpoint.
	spare, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Downtimes{}, err
	}
	nextAddr := spare.Addr().String()
	spare.Close()
	var ready atomic.Bool
	mod := func(o *bridge.Options) {
		if !aware {
			return
		}
		o.DrainPeers = "replicas.bench"
		o.ResolvePeers = func(context.Context, string) ([]string, error) {
			if ready.Load() {
				return []string{replacementIP}, nil
			}
			return nil, errors.New("no such host")
		}
	}
	old, err := startBridgeOn("127.0.0.1:0", g.relayAddr, cfg, mod)
	if err != nil {
		return Downtimes{}, err
	}
	g.bridges = []*runningBridge{old, nil}
	if g.front, err = startFront([]string{old.addr, nextAddr}); err != nil {
		return Downtimes{}, err
	}
	agents, stop, err := runAgents(ctx, cfg, g.front.addr)
	defer stop()
	if err != nil {
		return Downtimes{}, fmt.Errorf("before the drain: %w", err)
	}
	start := time.Now()
	old.stop() // SIGTERM: the drain runs while the replacement starts
	select {
	case <-ctx.Done():
		return Downtimes{}, ctx.Err()
	case <-time.After(startup):
	}
	next, err := startBridgeOn(nextAddr, g.relayAddr, cfg, nil)
	if err != nil {
		return Downtimes{}, fmt.Errorf("replacement: %w", err)
	}
	g.bridges[1] = next
	ready.Store(true)
	<-old.done // every session of the old bridge is closed
	old.stop = nil
	if err := waitFlowing(ctx, agents, time.Now(), cfg.Settle); err != nil {
		return Downtimes{}, fmt.Errorf("after the drain: %w", err)
	}
	stop()
	return summarize(agents, start), nil
}
