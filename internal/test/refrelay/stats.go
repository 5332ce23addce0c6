package refrelay

import (
	"context"
	"sync/atomic"

	"github.com/wirekube/relay-ws/relayproto"
)

// counters are updated without the server lock.
type counters struct {
	connections          atomic.Uint64
	registrations        atomic.Uint64
	replacements         atomic.Uint64
	secondRegisters      atomic.Uint64
	controlRefused       atomic.Uint64
	firstFrameRejected   atomic.Uint64
	badLength            atomic.Uint64
	forwarded            atomic.Uint64
	forwardedBytes       atomic.Uint64
	written              atomic.Uint64
	droppedQueueFull     atomic.Uint64
	droppedNoDestination atomic.Uint64
	droppedShort         atomic.Uint64
	ignored              atomic.Uint64
	unknown              atomic.Uint64
	stallDisconnects     atomic.Uint64
	udpPackets           atomic.Uint64
}

// Stats is a snapshot of the relay's counters, for tests and the benchmark.
// Every counter only grows, except ActiveSessions.
type Stats struct {
	Connections        uint64 // TCP connections accepted
	Registrations      uint64 // peer sessions opened by a first-frame Register
	Replacements       uint64 // older sessions closed by a Register of the same key
	SecondRegisters    uint64 // Register frames on a live session (ignored)
	ControlRefused     uint64 // control first frames answered with Error
	FirstFrameRejected uint64 // connections closed because of their first frame's type or size
	BadLength          uint64 // connections closed for N == 0 or N > 65536
	ActiveSessions     int    // peer sessions registered now

	FramesForwarded      uint64 // Data and BimodalHint frames queued to a destination
	BytesForwarded       uint64 // their payload bytes (after the key)
	FramesWritten        uint64 // frames written to a destination's connection buffer
	DroppedQueueFull     uint64 // newest frames dropped because the destination queue was full
	DroppedNoDestination uint64 // frames to a key with no live session
	DroppedShort         uint64 // Data or BimodalHint bodies shorter than a key
	Ignored              uint64 // Keepalive, NATProbe, RelayProbe, ExternalData
	Unknown              uint64 // frames logged as unknown and ignored (includes SecondRegisters)
	StallDisconnects     uint64 // peers disconnected because a write blocked for the stall timeout
	UDPPackets           uint64 // datagrams received (and dropped) on the UDP socket
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	c := &s.stats
	st := Stats{
		Connections:          c.connections.Load(),
		Registrations:        c.registrations.Load(),
		Replacements:         c.replacements.Load(),
		SecondRegisters:      c.secondRegisters.Load(),
		ControlRefused:       c.controlRefused.Load(),
		FirstFrameRejected:   c.firstFrameRejected.Load(),
		BadLength:            c.badLength.Load(),
		FramesForwarded:      c.forwarded.Load(),
		BytesForwarded:       c.forwardedBytes.Load(),
		FramesWritten:        c.written.Load(),
		DroppedQueueFull:     c.droppedQueueFull.Load(),
		DroppedNoDestination: c.droppedNoDestination.Load(),
		DroppedShort:         c.droppedShort.Load(),
		Ignored:              c.ignored.Load(),
		Unknown:              c.unknown.Load(),
		StallDisconnects:     c.stallDisconnects.Load(),
		UDPPackets:           c.udpPackets.Load(),
	}
	s.mu.Lock()
	st.ActiveSessions = len(s.sessions)
	s.mu.Unlock()
	return st
}

// Registered reports whether k has a live peer session now.
func (s *Server) Registered(k relayproto.Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[k] != nil
}

// RegisterCount is how many sessions ever registered k (zero: the relay
// never saw a Register for k as a first frame).
func (s *Server) RegisterCount(k relayproto.Key) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.regs[k]
}

// WaitRegistered blocks until k has a live session or ctx is done. The raw
// protocol has no Register acknowledgement; tests use this instead of sleeps.
func (s *Server) WaitRegistered(ctx context.Context, k relayproto.Key) error {
	return s.waitFor(ctx, func() bool { return s.sessions[k] != nil })
}

// WaitRegisterCount blocks until k was registered at least n times or ctx
// is done (for example n = 2 to wait for a replacement).
func (s *Server) WaitRegisterCount(ctx context.Context, k relayproto.Key, n int) error {
	return s.waitFor(ctx, func() bool { return s.regs[k] >= n })
}

// waitFor evaluates cond under the lock at each registration.
func (s *Server) waitFor(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ok, ch := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}
