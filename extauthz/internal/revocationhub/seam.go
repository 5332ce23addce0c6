package revocationhub

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/revocation"
)

// This file is the test seam of extauthz's tests, which judge with a real
// Authorizer and so cannot live in this package: a stream driven by hand,
// without gRPC, and the hub's counters. Nothing outside tests calls it.

// NewStream returns an empty stream, not yet joined to any LiveBindings.
func NewStream() *Stream { return newStream() }

// Join adds st to l unless limit streams are open already.
func (l *LiveBindings) Join(st *Stream, limit int) bool { return l.join(st, limit) }

// Add records b for id unless st holds limit other bindings (see add).
func (st *Stream) Add(id uint64, b revocation.Binding, limit int) (added, firstRefusal bool) {
	return st.add(id, b, limit)
}

// Remove drops the binding of id.
func (st *Stream) Remove(id uint64) { st.remove(id) }

// Size is the number of bindings st holds.
func (st *Stream) Size() int { return st.size() }

// MarkDirty marks key changed at at, as LiveBindings.Notify does.
func (st *Stream) MarkDirty(key string, at time.Time) { st.markDirty(key, at) }

// Queue appends ops as if the bridge had sent them.
func (st *Stream) Queue(ops ...revocation.Op) {
	st.mu.Lock()
	st.pending = append(st.pending, ops...)
	st.mu.Unlock()
}

// Take returns and clears what is pending on st.
func (st *Stream) Take() ([]revocation.Op, map[string]time.Time) { return st.take() }

// Judge judges what is pending on st, as the stream's sender does.
func (h *Hub) Judge(st *Stream) []revocation.Op { return h.judge(st) }

// Refused is revocation_streams_refused_total{reason}.
func (h *Hub) Refused(reason string) prometheus.Counter {
	return h.metrics.refused.WithLabelValues(reason)
}

// Backpressure is revocation_backpressure_total.
func (h *Hub) Backpressure() prometheus.Counter { return h.metrics.backpressure }
