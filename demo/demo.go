package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/wirekube/relay-ws/internal/test/testagent"
)

// ErrFailed is returned when the run completed but a step or an attack did
// not behave; the report says which.
var ErrFailed = errors.New("demo: not every step behaved")

// Run brings the stack up, connects two agents, streams traffic both ways,
// times round trips, runs the attacks, then stops every process it started.
// The report is complete even when err is not nil.
func Run(ctx context.Context, cfg *Config) (*Report, error) {
	return session(ctx, cfg, func(ctx context.Context, e *env, rep *Report) error {
		return e.demo(ctx, rep)
	})
}

// session owns the state dir and the processes around fn: whatever fn does
// or returns, every process is stopped by PID before session returns, and
// the last step checks that none of them is left.
func session(ctx context.Context, cfg *Config, fn func(context.Context, *env, *Report) error) (*Report, error) {
	rep := &Report{}
	if cfg == nil {
		return rep, errors.New("demo: nil Config (use Options.Complete)")
	}
	o := cfg.Options
	st, err := openStateDir(o.StateDir)
	if err != nil {
		return rep, err
	}
	defer st.close()
	e, err := startEnv(ctx, o, st, rep)
	if err == nil {
		err = fn(ctx, e, rep)
	}
	if e != nil {
		stopErr := rep.run(o.Progress, "everything stopped", func() (string, error) { return e.stop() })
		err = errors.Join(err, stopErr)
	}
	if err == nil && !rep.OK() {
		err = ErrFailed
	}
	return rep, err
}

// stop closes the stack and checks that no process it started is alive:
// neither a tracked PID nor any child of this process.
func (e *env) stop() (string, error) {
	err := e.close()
	var alive []int
	for _, pid := range e.pids {
		if processAlive(pid) {
			alive = append(alive, pid)
		}
	}
	children, cerr := childProcesses(os.Getpid())
	alive = append(alive, children...)
	if len(alive) > 0 {
		return "", errors.Join(err, cerr, fmt.Errorf("still running after stop: pids %v", alive))
	}
	return "every process stopped by PID, no child process left", errors.Join(err, cerr)
}

// connectPair creates node-a and node-b and proves both agents can connect
// and reach each other; the sessions are returned open.
func (e *env) connectPair(ctx context.Context, rep *Report) (*cast, error) {
	var nodes []*node
	err := rep.run(e.opts.Progress, "two Nodes with agent Pods and WireKubePeers", func() (d string, err error) {
		nodes, d, err = e.addNodes(ctx, &rep.Where, "node-a", "node-b")
		return d, err
	})
	if err != nil {
		return nil, err
	}
	n := &cast{a: nodes[0], b: nodes[1]}
	err = rep.run(e.opts.Progress, "agents connected through "+e.frontName, func() (string, error) {
		for _, x := range []*node{n.a, n.b} {
			c, err := e.connect(ctx, x)
			if err != nil {
				return "", fmt.Errorf("%s: %w", x.name, err)
			}
			c.Close()
		}
		return "node-a and node-b registered their keys over " + e.url() + " with Pod-bound tokens; each echo came back", nil
	})
	return n, err
}

// demo is the body of `make demo` once the stack is up.
func (e *env) demo(ctx context.Context, rep *Report) error {
	n, err := e.connectPair(ctx, rep)
	if err != nil {
		return err
	}
	ca, err := e.connect(ctx, n.a)
	if err != nil {
		return err
	}
	defer ca.Close()
	cb, err := e.connect(ctx, n.b)
	if err != nil {
		return err
	}
	defer cb.Close()
	if err := e.traffic(ctx, rep, ca, cb, n); err != nil {
		return err
	}
	e.attacks(ctx, rep, ca, cb, n)
	if bin := e.probePath(); bin != "" {
		ca.Close() // the probe registers node-a's key: one session per key
		rep.run(e.opts.Progress, "operator probe connects as node-a", func() (string, error) {
			return e.runProbe(ctx, bin, n.a)
		})
	}
	rep.run(e.opts.Progress, "metrics saved", func() (string, error) { return e.saveMetrics(ctx, rep) })
	return nil
}

// attacks adds the attacker's node, runs the attacks and checks that the
// live sessions of node-a and node-b were not disturbed.
func (e *env) attacks(ctx context.Context, rep *Report, ca, cb *testagent.Conn, n *cast) {
	err := rep.run(e.opts.Progress, "attacker's nodes (node-c, node-d)", func() (d string, err error) {
		nodes, d, err := e.addNodes(ctx, &rep.Where, "node-c", "node-d")
		if err == nil {
			n.c, n.d = nodes[0], nodes[1]
		}
		return d, err
	})
	if err != nil {
		return
	}
	rep.run(e.opts.Progress, "attacks answered as expected", func() (string, error) {
		rep.Attacks = e.runAttacks(ctx, *n)
		return attackSummary(rep.Attacks)
	})
	rep.run(e.opts.Progress, "live sessions undisturbed by the attacks", func() (string, error) {
		return "node-a and node-b still exchange data both ways", exchangeBothWays(ca, cb, n)
	})
}

func (e *env) traffic(ctx context.Context, rep *Report, ca, cb *testagent.Conn, n *cast) error {
	err := rep.run(e.opts.Progress, "traffic both ways", func() (string, error) {
		t, err := stream(ctx, ca, cb, n.a.key, n.b.key, e.opts.TrafficDuration)
		rep.Traffic = &t
		return fmt.Sprintf("%.1f MB/s for %s, %d frames, every payload intact and in order",
			t.MBps(), roundDuration(t.Duration), t.FramesAB+t.FramesBA), err
	})
	if err != nil {
		return err
	}
	return rep.run(e.opts.Progress, "round trips", func() (string, error) {
		rtts, err := roundTrips(ca, cb, n.a.key, n.b.key, e.opts.RoundTrips)
		rttStats(rep.Traffic, rtts)
		return fmt.Sprintf("p50 %s, p99 %s over %d", roundDuration(rep.Traffic.RTTP50), roundDuration(rep.Traffic.RTTP99), len(rtts)), err
	})
}

func attackSummary(rs []AttackResult) (string, error) {
	ok := 0
	for _, r := range rs {
		if r.OK() {
			ok++
		}
	}
	d := fmt.Sprintf("%d of %d", ok, len(rs))
	if ok != len(rs) || len(rs) != len(Attacks()) {
		return d, fmt.Errorf("%s attacks answered as expected", d)
	}
	return d, nil
}

func exchangeBothWays(ca, cb *testagent.Conn, n *cast) error {
	if err := exchangeOne(ca, cb, n.a, n.b); err != nil {
		return err
	}
	return exchangeOne(cb, ca, n.b, n.a)
}

func exchangeOne(from, to *testagent.Conn, nf, nt *node) error {
	p := []byte("still here " + nf.name)
	if err := from.SendData(nt.key, p); err != nil {
		return fmt.Errorf("%s -> %s: %w", nf.name, nt.name, err)
	}
	src, got, err := to.ReadData(ioTimeout)
	if err != nil {
		return fmt.Errorf("%s -> %s: %w", nf.name, nt.name, err)
	}
	if !src.Equal(nf.key) || string(got) != string(p) {
		return fmt.Errorf("%s -> %s: wrong frame", nf.name, nt.name)
	}
	return nil
}

// saveMetrics keeps /metrics of extauthz and the bridge: the URLs die with
// the stack, the files stay in the state dir.
func (e *env) saveMetrics(ctx context.Context, rep *Report) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	for _, m := range []struct{ name, url string }{
		{"extauthz", rep.Where.ExtauthzMetrics}, {"bridge", rep.Where.BridgeMetrics},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
		if err != nil {
			return "", fmt.Errorf("metrics %s: %w", m.name, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", fmt.Errorf("metrics %s: %w", m.name, err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("metrics %s: %s %w", m.name, resp.Status, err)
		}
		p, err := e.state.writeFile("metrics/"+m.name+".prom", body, 0o644)
		if err != nil {
			return "", err
		}
		rep.Where.MetricsSnapshot = append(rep.Where.MetricsSnapshot, p)
	}
	return e.state.join("metrics"), nil
}
