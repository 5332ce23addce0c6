package bridge

import (
	"sync"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// keyOwners maps each registered key to the session of this bridge that
// registered it last. The relay replaces an older session of the same key
// when a newer one registers; the bridge closes the older one itself first,
// with 1008 session_replaced, so that its client does not read an outage
// (1011 relay_lost) into it. A replacement through another bridge replica
// still reaches the older session as relay_lost. Safe for concurrent use.
type keyOwners struct {
	mu    sync.Mutex
	owner map[relayproto.Key]*session
}

// claim makes sess the owner of its key and returns the session it
// replaces, if any.
func (o *keyOwners) claim(sess *session) *session {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.owner == nil {
		o.owner = map[relayproto.Key]*session{}
	}
	old := o.owner[sess.id.Key]
	o.owner[sess.id.Key] = sess
	if old == sess {
		return nil
	}
	return old
}

// release forgets sess once it has ended, unless a newer session owns the
// key already.
func (o *keyOwners) release(sess *session) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.owner[sess.id.Key] == sess {
		delete(o.owner, sess.id.Key)
	}
}

// claimKey runs when sess's Register frame is verified, before the frame is
// written to the relay: the older session is closed (its relay connection
// first) before the relay can replace it.
func (sess *session) claimKey() {
	if old := sess.srv.owners.claim(sess); old != nil {
		old.end(closeWith(websocket.ClosePolicyViolation, contract.CloseSessionReplaced, nil))
	}
}
