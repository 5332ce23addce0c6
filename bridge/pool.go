package bridge

import (
	"sync"

	"github.com/wirekube/relay-ws/relayproto"
)

const (
	// maxWireFrame is the largest frame on the wire: a 4-byte length plus
	// MaxFrameSize bytes of type and body.
	maxWireFrame = 4 + relayproto.MaxFrameSize
	// streamBufSize holds any frame whole with room to spare, so a partial
	// frame at the end of a buffer can always be completed in place.
	streamBufSize = maxWireFrame + 8<<10
	// coalesceLimit bounds the frames packed into one message to the
	// client; a single larger frame is sent alone.
	coalesceLimit = 64 << 10
)

// bufPool lends stream buffers to sessions only while bytes are in flight,
// so an idle session holds none. Buffers are *[]byte to avoid an
// allocation per Put.
type bufPool struct{ p sync.Pool }

func newBufPool() *bufPool {
	return &bufPool{p: sync.Pool{New: func() any {
		b := make([]byte, streamBufSize)
		return &b
	}}}
}

func (bp *bufPool) get() *[]byte  { return bp.p.Get().(*[]byte) }
func (bp *bufPool) put(b *[]byte) { bp.p.Put(b) }
