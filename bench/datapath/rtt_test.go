package datapath

import (
	"context"
	"fmt"
	"github.com/wirekube/relay-ws/internal/test/procfs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/test/refrelay"
	"github.com/wirekube/relay-ws/relayproto"
)

// rttPath is one way to the relay in the round-trip benchmark: direct TCP,
// or a gateway child (its env adds settings, e.g. GOMAXPROCS, to try a
// lever side by side with the default).
type rttPath struct {
	name  string
	role  string
	env   []string
	child *child
	rtts  []time.Duration // every measured round trip, all rounds
	p50s  []time.Duration // per round
	cpu   float64         // gateway CPU seconds over all rounds
}

// BenchmarkRoundTrip is the latency added by the bridge:
// 64-byte Data frames ping-ponged between two registered peers, over direct
// TCP, through the bridge and through the naive gateway, in interleaved
// rounds so a swing in machine load hits every path alike. It prints each
// path's p50 and p99 over all rounds, the median over rounds of its p50
// minus direct TCP's p50 of the same round, the gateway's CPU time per
// round trip, and the run's steal time and load average. It runs once
// whatever b.N is. WIREKUBE_BENCH_RTT_ROUNDS and WIREKUBE_BENCH_RTT_N
// change the rounds (default 5) and round trips per round (2,000);
// WIREKUBE_BENCH_RTT_EXTRA="name:KEY=value,..." adds a bridge child with
// those environment settings; a first setting BIN=path runs that build of
// this test binary instead (the bridge before a change, side by side).
func BenchmarkRoundTrip(b *testing.B) {
	rounds, n := envInt("WIREKUBE_BENCH_RTT_ROUNDS", 5), envInt("WIREKUBE_BENCH_RTT_N", 2000)
	relay, addr := startRelay(b)
	paths := []*rttPath{{name: pDirect}, {name: pBridge, role: roleBridge}, {name: pNaive, role: roleNaive},
		{name: pForward, role: roleForward}}
	if wk := os.Getenv(wireKubeEnv); wk != "" {
		c, err := startWireKube(wk, addr, "")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.stop)
		paths = append(paths, &rttPath{name: "WireKube relay-ws (ws)", role: roleWireKube, child: c})
	}
	if extra := os.Getenv("WIREKUBE_BENCH_RTT_EXTRA"); extra != "" {
		name, env, _ := strings.Cut(extra, ":")
		paths = append(paths, &rttPath{name: "bridge " + name, role: roleBridge, env: strings.Split(env, ",")})
	}
	for _, p := range paths {
		if p.role == "" || p.child != nil {
			continue
		}
		c, err := startChildEnv(p.role, addr, p.env...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.stop)
		p.child = c
	}
	cpu0, err := procfs.MachineCPU()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	ctx := context.Background()
	var once sync.Once
	var err1 error
	for b.Loop() {
		once.Do(func() { err1 = measureRounds(ctx, paths, addr, relay, rounds, n) })
	}
	if err1 != nil {
		b.Fatal(err1)
	}
	cpu1, err := procfs.MachineCPU()
	if err != nil {
		b.Fatal(err)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("round trips: %d x %d-byte Data frames per path per round, %d interleaved rounds, %s; steal %.1f %%; loadavg %s\n",
		n, rttPayload, rounds, time.Since(start).Round(time.Second), 100*procfs.StealShare(cpu0, cpu1), strings.Join(strings.Fields(string(load))[:3], " "))
	direct := paths[0]
	for _, p := range paths {
		slices.Sort(p.rtts)
		line := fmt.Sprintf("  %-30s p50 %s p99 %s", p.name, us(percentile(p.rtts, 0.5)), us(percentile(p.rtts, 0.99)))
		if p != direct {
			added := make([]time.Duration, len(p.p50s))
			for r := range p.p50s {
				added[r] = p.p50s[r] - direct.p50s[r]
			}
			slices.Sort(added)
			line += fmt.Sprintf("; added p50 (median of rounds) +%s; gateway CPU %.1f us per round trip",
				us(added[len(added)/2]), 1e6*p.cpu/float64(rounds*n))
			b.ReportMetric(float64(added[len(added)/2])/1e3, strings.ReplaceAll(p.name, " ", "_")+"_added_p50_us")
		}
		fmt.Println(line)
	}
}

// measureRounds runs the rounds, every path once per round in order.
func measureRounds(ctx context.Context, paths []*rttPath, addr string, relay *refrelay.Server, rounds, n int) error {
	for round := range rounds {
		for i, p := range paths {
			if err := p.measure(ctx, addr, relay, byte(64+8*round+i), n); err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
		}
	}
	return nil
}

// rttPayload is the Data payload of a ping: 64 bytes.
const rttPayload = 64

func (p *rttPath) measure(ctx context.Context, relayAddr string, relay *refrelay.Server, salt byte, n int) error {
	ka, kb := benchKey(salt, 1), benchKey(salt, 2)
	dial := func(k relayproto.Key) (peer, error) {
		switch {
		case p.child == nil:
			return dialTCP(ctx, relayAddr, k)
		case p.role == roleForward:
			return dialTCP(ctx, p.child.addr, k)
		}
		return dialWS(ctx, "ws://"+p.child.addr+"/relay", k, 0, nil)
	}
	a, err := dial(ka)
	if err != nil {
		return err
	}
	defer a.close()
	bb, err := dial(kb)
	if err != nil {
		return err
	}
	defer bb.close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, k := range []relayproto.Key{ka, kb} {
		if err := relay.WaitRegistered(wctx, k); err != nil {
			return err
		}
	}
	var procs []proc
	if p.child != nil {
		procs = []proc{{name: p.role, pid: p.child.pid()}}
	}
	before, err := cpuOf(procs)
	if err != nil {
		return err
	}
	rtts, err := pingPong(a, bb, ka, kb, n, n/10, rttPayload)
	if err != nil {
		return err
	}
	after, err := cpuOf(procs)
	if err != nil {
		return err
	}
	for i := range procs {
		p.cpu += after[i] - before[i]
	}
	p.rtts = append(p.rtts, rtts...)
	p.p50s = append(p.p50s, percentile(rtts, 0.5))
	return nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
