package bridge

import (
	"log/slog"
)

// The full mark (--unready-at, docs/bridge.md#full) tells operators that a
// bridge is close to --max-sessions: wirekube_bridge_full turns 1 and the
// change is logged. It does not touch /readyz.
//
// Why not readiness: "full" is a healthy state, and readiness is read by
// things that act on ill health. A PodDisruptionBudget counts a NotReady
// Pod as disrupted (with the chart's unhealthyPodEvictionPolicy:
// AlwaysAllow the fullest replica becomes the one a drain may always evict,
// and every healthy one is blocked), and a load balancer that targets Pod
// IPs and health-checks /readyz (AWS target type ip, GKE NEG) deregisters
// the target and cuts its open connections after the deregistration delay.
// /readyz therefore reports health only: draining, revocation stream out of
// sync, raw relay unreachable. A bridge past its mark keeps admitting up to
// --max-sessions and refuses beyond it with 503 at_capacity.
//
// The mark is --unready-at percent of --max-sessions; the gauge falls back
// to 0 once the sessions are one percent of --max-sessions below it (at
// least one session), so a bridge near the mark does not flap.

// FullMarks returns the session counts at which the full mark is reached
// (hi) and left again (lo) for --max-sessions and --unready-at; ok is false
// when percent is 0 (off).
func FullMarks(maxSessions, percent int) (hi, lo int, ok bool) {
	if percent <= 0 {
		return 0, 0, false
	}
	hi = (maxSessions*percent + 99) / 100 // rounded up: at least one session
	lo = hi - max(1, maxSessions/100)
	return hi, lo, true
}

// observeFull moves the full mark's hysteresis, sets wirekube_bridge_full
// and logs each change. It is called on every /readyz and never fails it.
func (s *Server) observeFull() {
	hi, lo, ok := FullMarks(s.cfg.MaxSessions, s.cfg.UnreadyAt)
	if !ok {
		return
	}
	s.mu.Lock()
	n := s.slots
	s.mu.Unlock()
	want := n >= hi || (s.full.Load() && n > lo)
	if s.full.Swap(want) != want { // each change is logged once
		s.metrics.full.Set(boolGauge(want))
		s.log.Info("full mark", slog.Bool("full", want), slog.Int("sessions", n),
			slog.Int("full_at", hi), slog.Int("clear_below", lo), slog.Int("max_sessions", s.cfg.MaxSessions))
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
