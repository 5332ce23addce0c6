package bridge

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/room"
)

// The full-mark bounce steers new agents away from a bridge past its full
// mark without touching readiness (fullready.go says why readiness must
// stay health only). Such a bridge turns away room.Room.Share of new
// sessions with an upgrade and an immediate close 1013 replica_full: the
// WireKube agent counts the upgrade as connected and redials after its 1 s
// reset wait, where a refusal (503) would double its wait, and the Service
// or load balancer picks a replica afresh. Nothing is dialled, registered
// or spent for a bounce, and it holds no slot.
//
// Who draws (--full-bounce): the bridge itself, after the identity and its
// signature verified; or extauthz in the same Pod, from GET /room, before
// it spends a TokenReview (its answer: contract.BindingBounce). A bounce
// answer of extauthz is bounced whatever the flag says: it admits nothing.

// roomNow is this bridge's room as GET /room serves it.
func (s *Server) roomNow() room.Room {
	s.mu.Lock()
	r := room.Room{Sessions: s.slots, Max: s.cfg.MaxSessions, Draining: s.draining}
	s.mu.Unlock()
	if hi, _, ok := FullMarks(s.cfg.MaxSessions, s.cfg.UnreadyAt); ok {
		r.FullAt = hi
	}
	return r
}

// handleRoom serves the room on the metrics listener, for an extauthz
// beside this bridge (--bridge-room-url).
func (s *Server) handleRoom(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(s.roomNow())
}

// drawBounce reports whether this bridge bounces a verified new session
// (--full-bounce=bridge). A bridge at --max-sessions does not bounce: it
// refuses (503 at_capacity), and the agent's doubled wait is what a fleet
// with no room needs.
func (s *Server) drawBounce() bool {
	if s.cfg.FullBounce != "" && s.cfg.FullBounce != BounceByBridge {
		return false
	}
	return s.roomNow().Bounces(s.bounceDice)
}

// errBounceWithIdentity: a bounce answer with an identity header, or its
// binding repeated: not what extauthz sends.
var errBounceWithIdentity = errors.New("bounce answer with identity headers or a repeated binding")

// isBounceAnswer reports extauthz's bounce answer.
func isBounceAnswer(h http.Header) bool {
	return h.Get(contract.HeaderBinding) == contract.BindingBounce
}

// checkBounceAnswer checks extauthz's bounce answer the way admit checks an
// identity: a GET WebSocket upgrade, none of the identity headers a bounce
// does not carry, and extauthz's signature over the binding and the client
// address (when the check is on). A header set that fails is denied like
// any other.
func (s *Server) checkBounceAnswer(r *http.Request) (contract.Reason, error) {
	if reason, err := checkUpgradeRequest(r); reason != "" {
		return reason, err
	}
	for _, name := range []string{contract.HeaderPeer, contract.HeaderPublicKey, contract.HeaderIdentity,
		contract.HeaderTokenExpires} {
		if len(r.Header.Values(name)) != 0 {
			return contract.ReasonIdentityHeaderInvalid, errBounceWithIdentity
		}
	}
	if len(r.Header.Values(contract.HeaderBinding)) != 1 {
		return contract.ReasonIdentityHeaderInvalid, errBounceWithIdentity
	}
	return s.signatures.CheckBounce(r.Header)
}

// bounce upgrades and closes at once with 1013 replica_full; by is who drew
// it (bridge or authz), for the metric and the log line.
func (s *Server) bounce(w http.ResponseWriter, r *http.Request, id peerIdentity, by string) {
	ws, err := s.upgrader.Upgrade(w, r, nil) // write buffers come from the shared pool; nothing is kept
	if err != nil {
		return // the upgrader answered through upgradeError
	}
	defer ws.Close()
	s.metrics.bounced.WithLabelValues(by).Inc()
	ws.SetReadLimit(lingerLimit)
	s.closeLingering(ws, closeWith(websocket.CloseTryAgainLater, contract.CloseReplicaFull, nil), s.holdBounceLinger)
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "bounced", slog.String("reason", string(contract.CloseReplicaFull)),
		slog.String("decided_by", by), slog.String("peer", id.Peer), slog.String("request_id", id.RequestID),
		slog.String("client_address", id.ClientAddress), slog.String("remote", r.RemoteAddr))
}

// maxBounceLingers bounds the bounced connections kept open at once for
// their client's close answer; past it a bounce closes at once.
const maxBounceLingers = 1024

// holdBounceLinger counts one bounced connection waiting for its client's
// close answer, or refuses past maxBounceLingers.
func (s *Server) holdBounceLinger() (release func(), ok bool) {
	if s.bounceLingers.Add(1) > maxBounceLingers {
		s.bounceLingers.Add(-1)
		return nil, false
	}
	return func() { s.bounceLingers.Add(-1) }, true
}
