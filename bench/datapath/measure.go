package datapath

import (
	"context"
	"fmt"
	"github.com/wirekube/relay-ws/internal/test/procfs"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/wirekube/relay-ws/internal/test/refrelay"
	"github.com/wirekube/relay-ws/relayproto"
)

// measurePath runs one round on p: the throughput workload at both payload
// sizes (CPU of p's processes per GB of payload, MB/s) and the ping-pong.
// Each figure keeps its best round: the least CPU, the most MB/s, the
// lowest round trips.
func measurePath(ctx context.Context, cfg Config, relay *refrelay.Server, relayAddr string, p path, f *Figures, round int) error {
	salt := p.salt + byte(16*round)
	ka, kb := benchKey(salt, 1), benchKey(salt, 2)
	a, b, err := dialPair(ctx, relay, func(k relayproto.Key) (peer, error) { return p.dial(ctx, relayAddr, k, 0) }, ka, kb)
	if err != nil {
		return err
	}
	defer a.close()
	defer b.close()
	for _, run := range []struct{ payload, frames int }{{small, cfg.Frames1400}, {large, cfg.Frames16K}} {
		before, err := cpuOf(p.procs)
		if err != nil {
			return err
		}
		mbps, err := throughput(a, b, ka, kb, run.frames, run.payload, cfg.Window)
		if err != nil {
			return fmt.Errorf("%d-byte frames: %w", run.payload, err)
		}
		after, err := cpuOf(p.procs)
		if err != nil {
			return err
		}
		gb := float64(2*run.frames*run.payload) / 1e9
		perGB := make([]float64, len(before))
		var total float64
		for i := range before {
			perGB[i] = (after[i] - before[i]) / gb
			total += perGB[i]
		}
		if round == 0 || total < f.totalCPU(run.payload) {
			f.CPU[run.payload] = perGB
		}
		f.MBps[run.payload] = max(f.MBps[run.payload], mbps)
	}
	rtts, err := pingPong(a, b, ka, kb, cfg.PingPongs, cfg.PingPongs/10, cfg.PingPayload)
	if err != nil {
		return fmt.Errorf("ping-pong: %w", err)
	}
	p50, p99 := percentile(rtts, 0.50), percentile(rtts, 0.99)
	if round == 0 || p50 < f.P50 {
		f.P50 = p50
	}
	if round == 0 || p99 < f.P99 {
		f.P99 = p99
	}
	return nil
}

func cpuOf(procs []proc) ([]float64, error) {
	out := make([]float64, len(procs))
	for i, p := range procs {
		c, err := procfs.CPUSeconds(p.pid)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
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

// measureIdle opens cfg.IdleSessions registered sessions through p and
// reads the resident memory of p's processes before and after, each time
// after a forced GC in the Go ones, so both readings count live memory.
func measureIdle(ctx context.Context, cfg Config, relay *refrelay.Server, p path, f *Figures) error {
	salt := 128 + 2*p.salt
	// Warm the gateway's pools and the runtime with a few sessions first.
	if err := openIdle(ctx, relay, p, salt, 50, nil); err != nil {
		return err
	}
	rss0, err := settledRSS(p.procs)
	if err != nil {
		return err
	}
	var peers []peer
	defer func() {
		for _, pe := range peers {
			pe.close()
		}
	}()
	if err := openIdle(ctx, relay, p, salt+1, cfg.IdleSessions, &peers); err != nil {
		return err
	}
	rss1, err := settledRSS(p.procs)
	if err != nil {
		return err
	}
	f.Sessions = cfg.IdleSessions
	f.RSS = make([]float64, len(rss0))
	for i := range rss0 {
		f.RSS[i] = float64(rss1[i]-rss0[i]) / float64(cfg.IdleSessions)
	}
	return nil
}

func settledRSS(procs []proc) ([]int64, error) {
	// Let closed sessions and idle timers settle, and idle session readers
	// park (the bridge parks a side silent for 1 s: bridge/park.go).
	time.Sleep(3 * time.Second)
	out := make([]int64, len(procs))
	for i, p := range procs {
		if p.gc != nil {
			if err := p.gc(); err != nil {
				return nil, err
			}
		}
		r, err := procfs.RSSBytes(p.pid)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// openIdle opens n registered sessions through p (salt tells the key sets
// apart) and appends them to keep, or closes them at the end when keep is
// nil (the warm-up).
func openIdle(ctx context.Context, relay *refrelay.Server, p path, salt byte, n int, keep *[]peer) error {
	peers := make([]peer, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			pe, err := p.dial(gctx, "", benchKey(salt, i), 1024)
			peers[i] = pe
			return err
		})
	}
	err := g.Wait()
	if err == nil {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		for i := 0; err == nil && i < n; i++ {
			err = relay.WaitRegistered(wctx, benchKey(salt, i))
		}
	}
	for _, pe := range peers {
		if pe == nil {
			continue
		}
		if keep == nil || err != nil {
			pe.close()
		} else {
			*keep = append(*keep, pe)
		}
	}
	return err
}
