package bridge

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wirekube/relay-ws/relayproto"
)

// TestFrameCountsBatch: batched counting adds up to exactly what counting
// every frame would, per type, across runs, type changes and flushes.
func TestFrameCountsBatch(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c := frameCounts{counters: m.toClient, messages: m.messagesToClient}
	seq := []struct {
		t    relayproto.FrameType
		size int
	}{{relayproto.TypeData, 100}, {relayproto.TypeData, 50}, {relayproto.TypeKeepalive, 5},
		{relayproto.TypeData, 10}, {0x42, 7}, {0x42, 7}}
	for i, f := range seq {
		c.frame(f.t, f.size)
		if i == 2 {
			c.message()
			c.flush()
			c.flush() // a second flush adds nothing
		}
	}
	c.message()
	if got := promtest.ToFloat64(m.toClient[0x42].frames); got != 0 {
		t.Errorf("the open run of type 0x42 was added before the flush: %v frames", got)
	}
	c.flush()
	for _, want := range []struct {
		t              relayproto.FrameType
		frames, bytess float64
	}{{relayproto.TypeData, 3, 160}, {relayproto.TypeKeepalive, 1, 5}, {0x42, 2, 14}} {
		fc := m.toClient[want.t]
		if f, b := promtest.ToFloat64(fc.frames), promtest.ToFloat64(fc.bytes); f != want.frames || b != want.bytess {
			t.Errorf("type %#v: %v frames, %v bytes; want %v, %v", want.t, f, b, want.frames, want.bytess)
		}
	}
	if got := promtest.ToFloat64(m.messagesToClient); got != 2 {
		t.Errorf("%v messages, want 2", got)
	}
}
