package bridge

import (
	"github.com/wirekube/relay-ws/internal/contract"
)

// A slot is one admitted request: taken in connectRelay before the relay
// dial, held through the upgrade and the session, released by
// finishSession (or on the way out of a refused or failed upgrade). Drain
// waits until no slot is taken (idleLocked).

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// acquire admits one more request into the session count, or says why not.
func (s *Server) acquire() contract.Reason {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.draining:
		return contract.ReasonDraining
	case s.slots >= s.cfg.MaxSessions:
		return contract.ReasonAtCapacity
	}
	s.slots++
	return ""
}

func (s *Server) releaseSlot() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slots--
	if s.slots == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}
