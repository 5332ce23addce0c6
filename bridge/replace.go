package bridge

import (
	"context"
	"log/slog"
	"sync"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
	"github.com/wirekube/relay-ws/relayproto"
)

// keyOwners maps each registered key to the session of this bridge that
// registered it last. The relay replaces an older session of the same key
// when a newer one registers; the bridge closes the older one itself first,
// with 1008 session_replaced, so that its client does not read an outage
// (1011 relay_lost) into it. Only a session of the same binding may
// replace a live one (sameBinding): a session of another binding is
// refused with key_held_by_other_binding while the older one lives. A
// replacement through another bridge replica still reaches the older
// session as relay_lost (docs/revocation.md#replacement). Safe for
// concurrent use.
type keyOwners struct {
	mu    sync.Mutex
	owner map[relayproto.Key]*session
}

// sameBinding reports whether a and b were admitted by the same binding:
// the whole X-WireKube-Binding (ServiceAccount and its UID, Pod, Node,
// peer, key) when both carry one; without it (--revocation-addr= and a
// front that does not forward it) the identity and the peer.
func sameBinding(a, b *peerIdentity) bool {
	if a.Binding != "" && b.Binding != "" {
		return a.Binding == b.Binding
	}
	return a.Subject == b.Subject && a.Peer == b.Peer
}

// claim makes sess the owner of its key and returns the session it
// replaces, if any; or, when a live session of another binding owns the
// key, leaves it the owner and returns it as holder. A session that has
// ended holds nothing, whatever its binding: it is only lingering.
func (o *keyOwners) claim(sess *session) (replaced, holder *session) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.owner == nil {
		o.owner = map[relayproto.Key]*session{}
	}
	old := o.owner[sess.id.Key]
	if old == sess {
		return nil, nil
	}
	if old != nil && !sameBinding(&old.id, &sess.id) && !old.ended() {
		return nil, old
	}
	o.owner[sess.id.Key] = sess
	return old, nil
}

// heldByOther returns the live session of another binding that owns id's
// key, if any: an upgrade of id would be refused at its Register.
func (o *keyOwners) heldByOther(id *peerIdentity) *session {
	o.mu.Lock()
	defer o.mu.Unlock()
	old := o.owner[id.Key]
	if old == nil || sameBinding(&old.id, id) || old.ended() {
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
// written to the relay: the older session of the same binding is closed
// (its relay connection first) before the relay can replace it. When a
// live session of another binding holds the key, sess is refused instead
// and its Register never reaches the relay: two upgrades of different
// bindings both passed the check before the upgrade, the other one
// registered first.
func (sess *session) claimKey() *closeError {
	old, holder := sess.srv.owners.claim(sess)
	if holder != nil {
		sess.srv.logKeyHeld(sess.id, holder.id, "register")
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonKeyHeldByOtherBinding, nil)
	}
	if old != nil {
		old.endBehind(closeWith(websocket.ClosePolicyViolation, contract.CloseSessionReplaced, nil))
	}
	return nil
}

// logKeyHeld logs a refusal for key_held_by_other_binding, naming both
// sides: identity, peer and Pod (from the binding, when there is one), and
// the key's fingerprint. Never the whole key, never the binding itself.
// The count is wirekube_bridge_rejects_total or _sessions_total with that
// reason. at is where it was decided: "upgrade" or "register".
func (s *Server) logKeyHeld(id, holder peerIdentity, at string) {
	s.log.LogAttrs(context.Background(), slog.LevelWarn, "key held by a live session of another binding: refused",
		slog.String("at", at), slog.String("key", id.Key.Fingerprint()),
		slog.String("peer", id.Peer), slog.String("identity", id.Subject), slog.String("pod", bindingPod(id.Binding)),
		slog.String("request_id", id.RequestID),
		slog.String("holder_peer", holder.Peer), slog.String("holder_identity", holder.Subject),
		slog.String("holder_pod", bindingPod(holder.Binding)), slog.String("holder_request_id", holder.RequestID))
}

// bindingPod is the Pod a binding names ("" when none or no binding).
func bindingPod(binding string) string {
	b, err := revocation.ParseBinding(binding)
	if err != nil {
		return ""
	}
	return b.PodName
}
