package bridge

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/relayproto"
)

// frameCounts batches one goroutine's frame and message counter updates:
// runs of frames of one type are added to the shared counters once per
// batch (a run forwarded to the relay, a message to the client) instead of
// once per frame, so sessions on different cores do not take turns on the
// same counter's cache line for every frame. Not safe for concurrent use.
type frameCounts struct {
	counters *[256]frameCounter
	messages prometheus.Counter
	total    *atomic.Int64 // the session's own frame count; nil: none

	t             relayproto.FrameType
	frames, bytes int // the run of type t not yet added
	msgs          int // messages not yet added
}

func (c *frameCounts) frame(t relayproto.FrameType, size int) {
	if c.frames > 0 && t != c.t {
		c.flushRun()
	}
	c.t = t
	c.frames++
	c.bytes += size
}

func (c *frameCounts) message() { c.msgs++ }

// flush adds everything counted so far to the shared counters.
func (c *frameCounts) flush() {
	c.flushRun()
	if c.msgs > 0 {
		c.messages.Add(float64(c.msgs))
		c.msgs = 0
	}
}

func (c *frameCounts) flushRun() {
	if c.frames == 0 {
		return
	}
	fc := &c.counters[c.t]
	fc.frames.Add(float64(c.frames))
	fc.bytes.Add(float64(c.bytes))
	if c.total != nil {
		c.total.Add(int64(c.frames))
	}
	c.frames, c.bytes = 0, 0
}

// countMessage counts a binary message from the client.
func (sess *session) countMessage() error {
	sess.toRelayCounts.message()
	return nil
}

// countToRelay counts one client frame, forwarded or dropped.
func (sess *session) countToRelay(t relayproto.FrameType, size int, forwarded bool) {
	sess.toRelayCounts.frame(t, size)
	if !forwarded {
		sess.srv.metrics.droppedUnknown.Inc()
	}
}
