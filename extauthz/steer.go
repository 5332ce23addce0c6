package extauthz

import (
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/room"
)

// Rooms is the room of the bridge beside this extauthz
// (extauthz/internal/roomwatch.Watch, --bridge-room-url): ok is false
// while it is unread or stale.
type Rooms interface {
	Room() (r room.Room, ok bool)
}

// steer turns a new relay session away from a bridge past its full mark
// before any TokenReview is spent on it (docs/steering.md): a
// draining bridge's with 503 draining, a full one's with 503 at_capacity,
// and room.Room.Share of the others' with the bounce answer, which the
// bridge answers with an upgrade and a close 1013 replica_full (the agent
// redials in 1 s and the Service picks a replica afresh). ok is true when
// the check goes on. It steers nothing without a fresh room (the bridge's
// own cap still holds), off the relay path, or for a probe (it registers
// nothing and must reach the bridge that holds the peer).
func (a *Authorizer) steer(req *Request, c *checked) (d Decision, ok bool) {
	if a.rooms == nil || c.kind != pathRelay || probeOnly(req.Subprotocols) {
		return Decision{}, true
	}
	r, fresh := a.rooms.Room()
	if !fresh {
		return Decision{}, true
	}
	switch {
	case r.Draining:
		return deny(contract.ReasonDraining), false
	case r.Full():
		return deny(contract.ReasonAtCapacity), false
	case r.Bounces(a.dice):
		return bounce(), false
	}
	return Decision{}, true
}

// bounce is the bounce answer: an allow whose only identity header is
// X-WireKube-Binding: bounce; identitySigner.sign adds the client address
// and the signature over the two (contract.BindingBounce).
func bounce() Decision {
	hs := make([]Header, 1, 1+signedHeaders)
	hs[0] = Header{contract.HeaderBinding, contract.BindingBounce}
	return Decision{Headers: hs, Bounced: true, signRoom: true}
}

// result is the result label and log field of d and its reason:
// allow/allowed, bounce/bounced, or deny and the deny reason.
func (d *Decision) result() (string, contract.Reason) {
	switch {
	case d.Bounced:
		return "bounce", contract.ResultBounced
	case d.Allowed():
		return "allow", contract.ResultAllowed
	}
	return "deny", d.Reason
}
