package bridge

import (
	"context"
	"log/slog"
)

// A bridge close to --max-sessions asks to stop receiving new connections
// by failing /readyz, which takes its Pod out of the Service's endpoints
// while every open session carries on (docs/bridge.md#full).
//
// Why readiness: a Service picks endpoints at random, so the agents of a
// drained replica land on the others in equal shares whatever those hold.
// In a rolling update the replica drained second takes a third of the
// first one's agents and then gives its own to the other replicas, so the
// last old replica peaks near 1.8 times the mean. An agent refused 503
// at_capacity doubles its backoff (1, 2, 4 ... 30 s) and has the same
// chance to land there again. Left out of the endpoints, the full replica
// gets no dial to refuse.
//
// The mark is --unready-at percent of --max-sessions. /readyz fails from
// the mark and passes again once the sessions are one percent of
// --max-sessions below it (at least one session), so a replica near the
// mark does not flap at every probe. Upgrades that still arrive (the
// kubelet's probe period and failure threshold, then endpoint propagation)
// are admitted up to --max-sessions: the gap between the mark and the cap
// is the headroom for that lag.
//
// With --drain-peers, a full replica stays ready while the name resolves
// to no other ready replica: the only replica left (or the last of a set
// all full) stays an endpoint and refuses at --max-sessions with 503
// at_capacity, instead of leaving the Service with none. Without it the
// replica fails /readyz at the mark whatever the others hold.

// FullMarks returns the session counts at which /readyz starts failing
// (hi) and passes again (lo) for --max-sessions and --unready-at; ok is
// false when percent is 0 (off).
func FullMarks(maxSessions, percent int) (hi, lo int, ok bool) {
	if percent <= 0 {
		return 0, 0, false
	}
	hi = (maxSessions*percent + 99) / 100 // rounded up: at least one session
	lo = hi - max(1, maxSessions/100)
	return hi, lo, true
}

// fullUnready reports whether /readyz fails because the bridge is full,
// moving the hysteresis and logging each change.
func (s *Server) fullUnready(ctx context.Context) bool {
	hi, lo, ok := FullMarks(s.cfg.MaxSessions, s.cfg.UnreadyAt)
	if !ok {
		return false
	}
	s.mu.Lock()
	n := s.slots
	s.mu.Unlock()
	want := n >= hi || (s.full.Load() && n > lo)
	if want && s.cfg.DrainPeers != "" && s.otherReplicas(ctx) == 0 {
		want = false // the only ready replica: stay an endpoint
	}
	if s.full.Swap(want) != want { // each change is logged once
		s.metrics.full.Set(boolGauge(want))
		s.log.Info("full mark", slog.Bool("unready", want), slog.Int("sessions", n),
			slog.Int("unready_at", hi), slog.Int("ready_below", lo), slog.Int("max_sessions", s.cfg.MaxSessions))
	}
	return want
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
