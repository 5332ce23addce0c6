// Package steering turns a new relay session away from the bridge beside
// this extauthz when it is past its full mark, before any TokenReview is
// spent on it (docs/steering.md). It reads the bridge's room
// (extauthz/internal/roomwatch) and draws the bounce; extauthz makes the
// Decision of its answer.
package steering

import (
	"math/rand/v2"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/room"
)

// Rooms is the room of the bridge beside this extauthz
// (extauthz/internal/roomwatch.Watch, --bridge-room-url): ok is false
// while it is unread or stale.
type Rooms interface {
	Room() (r room.Room, ok bool)
}

// Steering reads rooms and draws the bounce with dice. Safe for concurrent
// use when both are.
type Steering struct {
	rooms Rooms
	dice  func() float64
}

// New returns the steering of rooms (nil: it steers nothing), drawing the
// bounce with dice (uniform in [0, 1); nil: math/rand/v2).
func New(rooms Rooms, dice func() float64) *Steering {
	if dice == nil {
		dice = rand.Float64
	}
	return &Steering{rooms: rooms, dice: dice}
}

// Turn says why a new relay session (not a probe: it registers nothing
// and must reach the bridge that holds the peer) is turned away: a
// draining bridge's with draining, a full one's with at_capacity, and
// room.Room.Share of the others' with the bounce answer
// (contract.ResultBounced), which the bridge answers with an upgrade and a
// close 1013 replica_full (the agent redials in 1 s and the Service picks
// a replica afresh). "" lets the check go on: so does every session
// without a fresh room (the bridge's own cap still holds).
func (s *Steering) Turn() contract.Reason {
	if s.rooms == nil {
		return ""
	}
	r, fresh := s.rooms.Room()
	if !fresh {
		return ""
	}
	switch {
	case r.Draining:
		return contract.ReasonDraining
	case r.Full():
		return contract.ReasonAtCapacity
	case r.Bounces(s.dice):
		return contract.ResultBounced
	}
	return ""
}
