package bridge

import (
	"errors"
	"log/slog"
	"os"
	"time"
)

// An idle session holds no goroutine. Once a direction has had nothing for
// idleAfter (a read deadline at idleAfter after its last bytes, pushed back
// when it passes while bytes still flow, so the per-frame path never
// touches it; the last bytes' time is the one the path reads anyway), its reader
// arms the connection on the server's poller (poller_linux.go) and its
// goroutine ends; the next bytes, EOF or error start a new one. A parked
// goroutine's stack does not shrink below twice what it uses, so each
// reader costs about 4 KiB of stack plus its descriptor while it waits:
// more than half of an idle session. While bytes come within idleAfter a
// reader waits in the runtime's netpoller as before: an active session
// pays nothing for this.
//
// The client direction parks only after the Register (before it the
// register deadline is the only bound) and with no partial frame
// buffered. Its read deadline still ends a silent client: while it is
// parked the pinger wakes it at the silence deadline (see ping), and the
// woken reader meets the passed deadline. end wakes a parked client reader
// so that it lingers after the close frame as before, and releases a
// parked relay direction.
const idleAfter = time.Second

// Directions of a session on the poller.
const (
	dirRelay = iota
	dirClient
)

// errParked ends a reader goroutine whose connection the poller now holds.
var errParked = errors.New("bridge: reader parked")

// relayIdle handles a relay read that failed with err: nil when the reader
// goes on (the idle deadline passed while bytes came, or parking was
// refused: the deadline is pushed back), errParked when its goroutine must
// end without touching the relay direction again, else err.
func (s *session) relayIdle(err error) error {
	if !s.parkable || s.fromRelay.raw == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	now := time.Now()
	if now.Sub(s.relayLast) >= idleAfter && s.out.n == 0 && s.parkDir(dirRelay, time.Time{}) {
		return errParked
	}
	return s.relay.SetReadDeadline(idleDeadline(s.relayLast, now))
}

// clientIdle is relayIdle for the client direction. A deadline passed
// after the silence limit is the ping timeout, and one after end the
// close grace: both are returned as they are.
func (s *session) clientIdle(err error) error {
	if s.ended() {
		return s.lingerRead(err)
	}
	if !s.parkable || s.fromClient.raw == nil || !s.filter.registered ||
		!errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	now := time.Now()
	silence := s.lastRefresh.Add(s.silenceLimit())
	if !now.Before(silence) {
		return err
	}
	if now.Sub(s.lastRead) >= idleAfter && s.raw.n == 0 && s.parkDir(dirClient, silence) {
		return errParked
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.result != nil {
		return nil // end has set the close grace or closed the connection
	}
	return s.ws.SetReadDeadline(earlier(silence, idleDeadline(s.lastRead, now)))
}

// lingerRead handles a client read error after end: nil to read on, else
// err. A read deadline met then may be one set before end (the idle or
// silence deadline) that passed while the close frame was still being
// written; stopping would close the connection before the frame is out
// (clientLoop) and skip the linger. So the reader waits for the closer
// (inflight, see stop) and reads on while the close grace lasts.
func (s *session) lingerRead(err error) error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	s.inflight.Wait()
	if time.Now().Before(s.lingerUntil) {
		return nil // closeClient has set the read deadline to lingerUntil
	}
	return err
}

// silenceLimit is how long a registered client may send nothing.
func (s *session) silenceLimit() time.Duration {
	ping := s.srv.cfg.PingInterval
	return 3*ping + ping/4
}

// parkDir hands the direction's idle connection to the poller unless the
// session has ended (then the reader goes on and meets the closed
// connection or the close grace). silence is the client's silence
// deadline, kept by the pinger while the client direction is parked.
func (s *session) parkDir(dir int, silence time.Time) bool {
	r := &s.fromRelay
	if dir == dirClient {
		r = &s.fromClient
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.result != nil {
		return false
	}
	if s.park == nil {
		if s.park = s.srv.parker(); s.park == nil {
			return false // Run has ended: wait as before
		}
	}
	var aerr error
	if err := r.raw.Control(func(fd uintptr) { aerr = s.park.arm(s, dir, int(fd)) }); err != nil || aerr != nil {
		return false
	}
	if dir == dirRelay {
		s.relayParked = true
		return true
	}
	s.clientParked = true
	s.silenceAt = silence
	if silence.Before(s.pingAt) { // only with a ping interval under idleAfter
		s.pingAt = silence
		s.pinger.Reset(time.Until(silence))
	}
	return true
}

// unpark starts a reader for a parked direction: the poller saw bytes,
// EOF or an error on its connection.
func (s *session) unpark(dir int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case dir == dirRelay && s.relayParked:
		s.relayParked = false
		_ = s.relay.SetReadDeadline(time.Now().Add(idleAfter))
		go s.relayToClient()
	case dir == dirClient && s.clientParked:
		s.unparkClientLocked()
	}
}

// unparkClientLocked starts a client reader with its read deadline at the
// silence deadline or idleAfter, whichever comes first; the caller holds
// s.mu and s.clientParked is set.
func (s *session) unparkClientLocked() {
	s.clientParked = false
	if s.result == nil {
		_ = s.ws.SetReadDeadline(earlier(s.silenceAt, time.Now().Add(idleAfter)))
	}
	go s.clientLoop()
}

// idleDeadline is idleAfter after last, or after now when that has passed
// (a partial frame waits for its rest; parking was refused).
func idleDeadline(last, now time.Time) time.Time {
	if d := last.Add(idleAfter); d.After(now) {
		return d
	}
	return now.Add(idleAfter)
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// startParking lets readers park from now on (Run).
func (s *Server) startParking() {
	s.parkMu.Lock()
	defer s.parkMu.Unlock()
	s.parking = pollerSupported
}

// parkingOn reports whether a new session's readers may park.
func (s *Server) parkingOn() bool {
	s.parkMu.Lock()
	defer s.parkMu.Unlock()
	return s.parking
}

// parker returns the poller, made at the first call; nil when parking is
// off (Run has ended) or no poller could be made (logged once).
func (s *Server) parker() *poller {
	s.parkMu.Lock()
	defer s.parkMu.Unlock()
	if s.poller == nil && s.parking {
		p, err := newPoller()
		if err != nil {
			s.parking = false
			s.log.Warn("idle sessions keep their reader goroutines", slog.String("error", err.Error()))
			return nil
		}
		s.poller = p
	}
	if !s.parking {
		return nil
	}
	return s.poller
}

// stopParking ends parking and closes the poller once every session is
// gone (Run, after the drain).
func (s *Server) stopParking() {
	s.parkMu.Lock()
	p := s.poller
	s.parking, s.poller = false, nil
	s.parkMu.Unlock()
	if p != nil {
		p.close()
	}
}
