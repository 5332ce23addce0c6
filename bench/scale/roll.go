package scale

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/wirekube/relay-ws/internal/test/stack"
)

// roll is a rolling update of the Deployment as the chart's strategy
// (maxSurge 1, maxUnavailable 0) and PDB (maxUnavailable 1) run it: for
// each old replica, a new one is started and becomes ready, then the old
// one is terminated: it is no longer a Service endpoint (the generators
// stop dialing its front, which keeps carrying the open sessions, as the
// chart's front does through its preStop wait) and its bridge drains
// (SIGTERM: closes 1001 at --drain-rate); its front and extauthz stop once
// the bridge is gone (extauthz serves the bridge's revocation stream to
// the end). Signalling nginx at the drain's start instead (SIGQUIT) let
// the drained bridge exit within seconds rather than at its pace: the
// sessions ended on the front's side, all agents moving together.
// The next step starts when every agent is admitted again.
func (r *run) roll(ctx context.Context, res *Result) error {
	p, err := r.beginPhase(ctx)
	if err != nil {
		return err
	}
	first := r.count(func(a *agent) bool { return a.up && a.on == 0 })
	var drains []string
	for k := range r.cfg.Replicas {
		d, err := r.rollStep(ctx, k)
		if err != nil {
			return fmt.Errorf("rolling update, replica %d: %w", k, err)
		}
		drains = append(drains, d)
	}
	r.mu.Lock()
	last := p.lastBackLocked(r.agents)
	r.mu.Unlock()
	if res.Roll, err = r.endPhase(ctx, p); err != nil {
		return err
	}
	res.Roll.LastBack, res.Roll.DrainRate, res.Roll.ServingReplicas = last, r.cfg.DrainRate, r.cfg.Replicas
	res.Roll.SessionsPerReplica0, res.Roll.Drains = first, strings.Join(drains, ", ")
	res.Roll.ReviewRate = r.cfg.ReviewQPS * float64(r.cfg.Replicas)
	return nil
}

// rollStep surges a new replica, terminates old replica k and waits until
// every agent not stopped is admitted again. It returns how many sessions
// the drain closed and how long it took.
func (r *run) rollStep(ctx context.Context, k int) (string, error) {
	if err := r.startReplica(ctx); err != nil {
		return "", err
	}
	old := r.replicas[k]
	n := r.count(func(a *agent) bool { return a.up && a.on == k })
	fmt.Fprintf(r.out, "scale: rolling update: replica %d ready, draining replica %d (%d sessions)\n", len(r.replicas)-1, k, n)
	start := time.Now()
	if err := r.ep.terminate(k); err != nil {
		return "", err
	}
	if err := old.bridge.Signal(syscall.SIGTERM); err != nil {
		return "", err
	}
	bound := r.cfg.drainTimeout() + 30*time.Second
	select {
	case <-old.bridge.Done():
	case <-time.After(bound):
		return "", fmt.Errorf("bridge still draining after %s", bound)
	case <-ctx.Done():
		return "", ctx.Err()
	}
	drain := fmt.Sprintf("%d in %s", n, time.Since(start).Round(time.Second))
	for _, proc := range []*stack.Proc{old.extauthz, old.nginx} {
		_ = proc.Stop(10 * time.Second) // SIGTERM, then SIGKILL: what exits is all that matters here
	}
	old.killed = true
	want := r.cfg.Agents - r.count(func(a *agent) bool { return a.stopped })
	return drain, r.waitUntil(ctx, r.cfg.Settle, func() (bool, string) {
		n := r.count(func(a *agent) bool { return a.up && !a.stopped })
		return n == want, fmt.Sprintf("rolling update: %d of %d agents admitted after replica %d drained", n, want, k)
	})
}
