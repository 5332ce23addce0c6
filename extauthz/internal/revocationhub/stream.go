package revocationhub

import (
	"context"
	"sync"
	"time"

	"github.com/wirekube/relay-ws/internal/revocation"
)

// maxPendingOps bounds the ops received from a bridge and not yet judged.
// Past it the stream stops reading (back-pressure: gRPC flow control then
// stops the sender) until the judge, which waits for its own sends, takes
// them: a bridge that sends without reading cannot grow extauthz's memory.
const maxPendingOps = 4 * revocation.MaxOps

// Stream is the state of one bridge's stream: the bindings it holds
// and an index from watched object to the bindings that read it, the ops
// received and the object keys changed since the sender last looked.
type Stream struct {
	mu       sync.Mutex
	bindings map[uint64]revocation.Binding
	index    map[string]map[uint64]struct{}
	pending  []revocation.Op
	dirty    map[string]time.Time // key -> first change not yet judged
	wake     chan struct{}        // capacity 1: something is pending
	room     chan struct{}        // capacity 1: take made room in pending
	limited  bool                 // an Add was refused for the bindings bound (logged once)
}

func newStream() *Stream {
	return &Stream{
		bindings: map[uint64]revocation.Binding{}, index: map[string]map[uint64]struct{}{},
		dirty: map[string]time.Time{}, wake: make(chan struct{}, 1), room: make(chan struct{}, 1),
	}
}

func (st *Stream) signal() {
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// receive reads the bridge's messages until the stream ends or ctx is
// done. Any message that does not validate ends the stream: the bridge then
// resyncs. While maxPendingOps are pending it reads nothing (onPause counts
// each such pause).
func (st *Stream) receive(ctx context.Context, stream revocation.Stream, onPause func()) error {
	for {
		ops, err := revocation.RecvFromBridge(stream)
		if err != nil {
			return err
		}
		st.mu.Lock()
		st.pending = append(st.pending, ops...)
		full := len(st.pending) >= maxPendingOps
		st.mu.Unlock()
		st.signal()
		if full {
			onPause()
			if err := st.waitRoom(ctx); err != nil {
				return err
			}
		}
	}
}

// waitRoom blocks until take leaves fewer than maxPendingOps pending.
func (st *Stream) waitRoom(ctx context.Context) error {
	for {
		st.mu.Lock()
		n := len(st.pending)
		st.mu.Unlock()
		if n < maxPendingOps {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-st.room:
		}
	}
}

func (st *Stream) markDirty(key string, at time.Time) {
	st.mu.Lock()
	if _, ok := st.index[key]; !ok {
		st.mu.Unlock()
		return // no binding reads it
	}
	if _, ok := st.dirty[key]; !ok {
		st.dirty[key] = at
	}
	st.mu.Unlock()
	st.signal()
}

func (st *Stream) take() ([]revocation.Op, map[string]time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	ops, dirty := st.pending, st.dirty
	st.pending, st.dirty = nil, map[string]time.Time{}
	select {
	case st.room <- struct{}{}:
	default:
	}
	return ops, dirty
}

// add records b for id unless the stream already holds limit other
// bindings; it reports whether it did, and whether this was the first
// refusal on the stream.
func (st *Stream) add(id uint64, b revocation.Binding, limit int) (added, firstRefusal bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.bindings[id]; ok {
		st.removeLocked(id)
	}
	if len(st.bindings) >= limit {
		first := !st.limited
		st.limited = true
		return false, first
	}
	st.bindings[id] = b
	for _, k := range BindingKeys(b) {
		if st.index[k] == nil {
			st.index[k] = map[uint64]struct{}{}
		}
		st.index[k][id] = struct{}{}
	}
	return true, false
}

func (st *Stream) remove(id uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.removeLocked(id)
}

func (st *Stream) removeLocked(id uint64) {
	b, ok := st.bindings[id]
	if !ok {
		return
	}
	delete(st.bindings, id)
	for _, k := range BindingKeys(b) {
		delete(st.index[k], id)
		if len(st.index[k]) == 0 {
			delete(st.index, k)
		}
	}
}

// bound returns a copy of the bindings that read key.
func (st *Stream) bound(key string) map[uint64]revocation.Binding {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make(map[uint64]revocation.Binding, len(st.index[key]))
	for id := range st.index[key] {
		out[id] = st.bindings[id]
	}
	return out
}

func (st *Stream) size() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.bindings)
}

// otherHolder returns a binding of st other than b indexed under key.
func (st *Stream) otherHolder(key string, b revocation.Binding) (revocation.Binding, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for id := range st.index[key] {
		if o := st.bindings[id]; o != b {
			return o, true
		}
	}
	return revocation.Binding{}, false
}

// Reasons of revocation_streams_refused_total.
const (
	refusedUnauthenticated = "unauthenticated"
	refusedStreamsLimit    = "streams_limit"
)
