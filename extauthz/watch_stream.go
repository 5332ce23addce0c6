package extauthz

import (
	"time"

	"sync"

	"github.com/wirekube/relay-ws/internal/revocation"
)

// watchStream is the state of one bridge's stream: the bindings it holds
// and an index from watched object to the bindings that read it, the ops
// received and the object keys changed since the sender last looked.
type watchStream struct {
	mu       sync.Mutex
	bindings map[uint64]revocation.Binding
	index    map[string]map[uint64]struct{}
	pending  []revocation.Op
	dirty    map[string]time.Time // key -> first change not yet judged
	wake     chan struct{}        // capacity 1: something is pending
}

func newWatchStream() *watchStream {
	return &watchStream{
		bindings: map[uint64]revocation.Binding{}, index: map[string]map[uint64]struct{}{},
		dirty: map[string]time.Time{}, wake: make(chan struct{}, 1),
	}
}

func (st *watchStream) signal() {
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// receive reads the bridge's messages until the stream ends. Any message
// that does not decode ends the stream: the bridge then resyncs.
func (st *watchStream) receive(stream revocation.Stream) error {
	for {
		ops, err := revocation.Recv(stream, revocation.Kind.FromBridge)
		if err != nil {
			return err
		}
		st.mu.Lock()
		st.pending = append(st.pending, ops...)
		st.mu.Unlock()
		st.signal()
	}
}

func (st *watchStream) markDirty(key string, at time.Time) {
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

func (st *watchStream) take() ([]revocation.Op, map[string]time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	ops, dirty := st.pending, st.dirty
	st.pending, st.dirty = nil, map[string]time.Time{}
	return ops, dirty
}

func (st *watchStream) add(id uint64, b revocation.Binding) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.bindings[id]; ok {
		st.removeLocked(id)
	}
	st.bindings[id] = b
	for _, k := range bindingKeys(b) {
		if st.index[k] == nil {
			st.index[k] = map[uint64]struct{}{}
		}
		st.index[k][id] = struct{}{}
	}
}

func (st *watchStream) remove(id uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.removeLocked(id)
}

func (st *watchStream) removeLocked(id uint64) {
	b, ok := st.bindings[id]
	if !ok {
		return
	}
	delete(st.bindings, id)
	for _, k := range bindingKeys(b) {
		delete(st.index[k], id)
		if len(st.index[k]) == 0 {
			delete(st.index, k)
		}
	}
}

// bound returns a copy of the bindings that read key.
func (st *watchStream) bound(key string) map[uint64]revocation.Binding {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make(map[uint64]revocation.Binding, len(st.index[key]))
	for id := range st.index[key] {
		out[id] = st.bindings[id]
	}
	return out
}

func (st *watchStream) size() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.bindings)
}
