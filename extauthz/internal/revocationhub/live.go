package revocationhub

import (
	"sync"
	"time"

	"github.com/wirekube/relay-ws/internal/revocation"
)

// LiveBindings is the set of open revocation streams and so of the bindings
// the bridges streaming to this process hold for their live sessions. It is
// built before the Authorizer and the Hub and passed to both: the
// hub adds and removes its streams, the Authorizer asks which binding holds
// a key (extauthz/keyholder.go) and marks objects changed when a
// follow-up review fails (extauthz/internal/standin/followup.go), the informers mark them on every change. Safe for
// concurrent use.
type LiveBindings struct {
	now func() time.Time

	mu      sync.Mutex
	streams map[*Stream]struct{}
}

// NewLiveBindings returns an empty set.
func NewLiveBindings() *LiveBindings {
	return &LiveBindings{now: time.Now, streams: map[*Stream]struct{}{}}
}

// Notify marks the object key (ObjectKey) changed on every stream. It is the
// informers' OnChange callback and never blocks.
func (l *LiveBindings) Notify(key string) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for st := range l.streams {
		st.markDirty(key, now)
	}
}

// join adds st unless limit streams are open already.
func (l *LiveBindings) join(st *Stream, limit int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.streams) >= limit {
		return false
	}
	l.streams[st] = struct{}{}
	return true
}

// leave removes st.
func (l *LiveBindings) leave(st *Stream) {
	l.mu.Lock()
	delete(l.streams, st)
	l.mu.Unlock()
}

// counts returns the open streams and the bindings they hold.
func (l *LiveBindings) counts() (streams, bindings int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for st := range l.streams {
		bindings += st.size()
	}
	return len(l.streams), bindings
}

// OtherHolder implements extauthz's keyHolders over every stream: the bindings the
// bridges sent for their live sessions, upgraded and not yet ended
// (registered or not).
func (l *LiveBindings) OtherHolder(b revocation.Binding) (revocation.Binding, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.streams) == 0 {
		return revocation.Binding{}, false // no stream: no key to build
	}
	key := KeyHashKey(b.KeySHA256)
	for st := range l.streams {
		if o, ok := st.otherHolder(key, b); ok {
			return o, true
		}
	}
	return revocation.Binding{}, false
}
