// Package room is how full a bridge is, in the one form both binaries read:
// the bridge serves it as JSON on GET /room of its metrics listener
// (Path), and an extauthz beside it in the same Pod polls it so that it can
// turn a new agent away before spending a TokenReview on it.
//
// Between the full mark (the bridge's --unready-at percent of
// --max-sessions) and --max-sessions, a share of new sessions is bounced:
// upgraded and closed at once with 1013 (contract.CloseReplicaFull). The
// WireKube agent counts a finished upgrade as connected, so its next dial
// comes after its reset wait (1 s), not a doubled one, and a Service or
// load balancer that picks an endpoint per connection sends it to another
// replica with the chance the others have. The share rises from none at
// the mark to all at --max-sessions, so a replica that is full while its
// peers have room sheds most of what reaches it, and a fleet that is full
// everywhere still admits (each try has the share's complement). At
// --max-sessions the bridge answers 503 at_capacity as before: the agent's
// wait doubles, which is what a fleet with no room at all needs.
package room

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Path is where the bridge serves its Room.
const Path = "/room"

// MaxBody bounds a /room answer a reader accepts; a real one is under 100
// bytes.
const MaxBody = 1024

// Room is a bridge's session count against its marks.
type Room struct {
	// Sessions is the admitted requests the bridge holds (its slots).
	Sessions int `json:"sessions"`
	// FullAt is the session count of the full mark; 0: the mark is off,
	// nothing is bounced.
	FullAt int `json:"full_at"`
	// Max is --max-sessions.
	Max int `json:"max_sessions"`
	// Draining: the bridge admits nothing (503 draining).
	Draining bool `json:"draining"`
}

// Share is the part of new sessions a bridge in room r bounces: 0 below
// the full mark (or with the mark off), rising by equal steps from
// 1/(Max-FullAt+1) at the mark to 1 at Max. A bridge at or past Max, or
// draining, refuses rather than bounces (Full, Draining).
func (r Room) Share() float64 {
	if r.FullAt <= 0 || r.Sessions < r.FullAt || r.Max <= 0 {
		return 0
	}
	if r.Sessions >= r.Max || r.FullAt > r.Max {
		return 1
	}
	return float64(r.Sessions-r.FullAt+1) / float64(r.Max-r.FullAt+1)
}

// Bounces reports whether a new session is bounced from a bridge in room
// r: never when the bridge refuses it instead (Full, Draining), else with
// probability Share. draw is uniform in [0, 1) and is called only when the
// share is above 0.
func (r Room) Bounces(draw func() float64) bool {
	if r.Full() || r.Draining {
		return false
	}
	share := r.Share()
	return share > 0 && draw() < share
}

// Full reports a bridge that refuses every new session (503 at_capacity).
func (r Room) Full() bool { return r.Max > 0 && r.Sessions >= r.Max }

// Parse reads a /room answer: a JSON object of at most MaxBody bytes with
// non-negative counts. Unknown fields are ignored (a newer bridge may say
// more).
func Parse(b []byte) (Room, error) {
	var r Room
	if len(b) > MaxBody {
		return Room{}, fmt.Errorf("room: answer over %d bytes", MaxBody)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Room{}, fmt.Errorf("room: %w", err)
	}
	if r.Sessions < 0 || r.FullAt < 0 || r.Max < 0 {
		return Room{}, errors.New("room: a negative count")
	}
	return r, nil
}
