package bridge

import (
	"errors"
	"net"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/bridge/internal/wsframe"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// errClientClose stops decoding at the client's close frame.
var errClientClose = errors.New("bridge: client sent close")

// clientToRelay reads the client's WebSocket frames straight from the
// connection, turns its binary messages into one byte stream, filters it
// frame by frame and writes verified frames to the relay. Every way out
// calls end. After end it lingers (see session.end): it keeps reading,
// discarding, until the client answers the close frame, sends EOF, the
// close grace expires or lingerLimit bytes were dropped, so that closing
// the socket does not reset the connection and lose the close frame.
//
// It reports whether it parked instead (park.go): then its goroutine must
// end without touching the client direction again.
func (s *session) clientToRelay() (parked bool) {
	for {
		if err := s.fromClient.readInto(&s.raw); err != nil {
			switch err = s.clientIdle(err); err {
			case nil:
				continue
			case errParked:
				return true
			}
			s.end(clientReadClose(err, s.filter.registered))
			return false
		}
		s.refreshReadDeadline()
		done, cerr := s.decodeClient()
		if cerr != nil {
			s.end(cerr)
		}
		if done {
			return false
		}
	}
}

// decodeClient decodes the bytes read so far and passes the message
// payload through the frame filter. It reports done when reading should
// stop (the client's close frame, or the linger bound after end).
//
// One buffer holds both stages, and payload is unmasked in place: s.raw is
// [decoded stream not yet consumed by the filter: s.inLen bytes][client
// bytes not yet decoded]. The decoder writes each payload byte at or before
// the place it read it from, closing the gaps the frame headers leave, so
// there is no second copy of the stream and no second buffer.
func (s *session) decodeClient() (bool, *closeError) {
	if s.raw.n == s.inLen {
		return false, nil
	}
	ended := s.ended()
	if ended && s.lingerRaw {
		return s.linger(0), nil
	}
	s.dec.Discard = s.dec.Discard || ended
	buf, start := *s.raw.b, s.inLen
	used, wrote, err := s.dec.Decode(buf[start:s.raw.n], buf[start:])
	s.inLen += wrote
	var done bool
	cerr := s.flushIn(ended)
	if err != nil && cerr == nil {
		done, cerr = s.decodeErr(err, ended)
	}
	// Keep only what was not decoded, whatever stopped decoding: the
	// decoder has consumed the rest, and must not see it again.
	s.raw.n = s.inLen + copy(buf[s.inLen:], buf[start+used:s.raw.n])
	s.release(&s.raw)
	s.toRelayCounts.flush() // dropped frames and messages of this batch
	if ended && !done {
		done = s.linger(used)
	}
	return done, cerr
}

// linger accounts for n client bytes read and dropped after the close
// frame was sent, dropping everything still buffered once decoding has
// stopped making sense (lingerRaw). It reports done when the byte bound
// is reached: closing then may reset the connection, but the close frame
// has long been on its way.
func (s *session) linger(n int) bool {
	if s.lingerRaw {
		n += s.raw.n
		s.raw.n = 0
		s.release(&s.raw)
	}
	s.lingered += n
	return s.lingered >= lingerLimit
}

// flushIn runs the decoded stream at the start of s.raw through the
// filter, forwarding verified frames; an incomplete frame moves to the
// start of the buffer for the next bytes.
func (s *session) flushIn(ended bool) *closeError {
	if ended {
		s.inLen = 0
		return nil
	}
	if s.inLen == 0 {
		return nil
	}
	buf := *s.raw.b
	used, err := s.filter.scan(buf[:s.inLen], s.writeRelay)
	if used > 0 {
		s.inLen = copy(buf, buf[used:s.inLen])
	}
	s.noteRegistered()
	if err != nil {
		var ce *closeError
		if errors.As(err, &ce) {
			return ce
		}
		return closeWith(websocket.CloseInternalServerErr, contract.CloseRelayLost, err)
	}
	return nil
}

// decodeErr maps a decoding stop to the session's end.
func (s *session) decodeErr(err error, ended bool) (bool, *closeError) {
	switch {
	case ended && errors.Is(err, errClientClose):
		return true, nil // the client's answer to our close frame
	case ended:
		// Not WebSocket any more (or the frame we refused): drop bytes
		// without decoding until EOF, the close grace or lingerLimit.
		s.lingerRaw = true
		return false, nil
	case errors.Is(err, errClientClose):
		return true, closeWith(0, contract.ResultClientClosed, nil)
	case errors.Is(err, wsframe.ErrText):
		return false, closeWith(websocket.CloseUnsupportedData, contract.CloseTextMessage, nil)
	default:
		return false, closeWith(websocket.CloseProtocolError, contract.CloseProtocolError, err)
	}
}

// onControl answers the client's control frames: a ping gets a pong, a
// close gets a close echoing its code, and both count as signs of life.
func (s *session) onControl(op byte, payload []byte) error {
	deadline := time.Now().Add(s.srv.cfg.WriteTimeout)
	switch op {
	case wsframe.OpPing:
		_ = s.ws.WriteControl(websocket.PongMessage, payload, deadline)
	case wsframe.OpClose:
		if s.ended() {
			return errClientClose
		}
		code, err := wsframe.ParseClientClose(payload)
		if err != nil {
			return err // answered with 1002 websocket_protocol_error
		}
		// 1005 formats as an empty close.
		_ = s.writeClose(websocket.FormatCloseMessage(code, ""), deadline)
		return errClientClose
	}
	return nil
}

// writeRelay sends verified client bytes to the relay with the write
// timeout, so a stuck relay ends only this session.
func (s *session) writeRelay(p []byte) error {
	// A verified Register leaves the peer's unregistered share before the
	// relay sees it: otherwise the relay's answer to a frame in the same run
	// can reach the agent, and its next dial be refused 429, first.
	s.noteRegistered()
	s.toRelayCounts.flush() // counted before the relay sees them
	if err := s.relay.SetWriteDeadline(time.Now().Add(s.srv.cfg.WriteTimeout)); err != nil {
		return err
	}
	var n int
	var err error
	if s.fromRelay.canWrite() {
		n, err = s.fromClient.write(&s.fromRelay, 0, p)
	} else {
		n, err = s.relay.Write(p)
	}
	s.bytesToRelay.Add(int64(n))
	return err
}

// noteRegistered runs registered() once, as soon as the filter has
// verified the Register.
func (s *session) noteRegistered() {
	if s.filter.registered && !s.regNoted {
		s.regNoted = true
		s.registered()
	}
}

// clientReadClose classifies the error that ended reading the client.
func clientReadClose(err error, registered bool) *closeError {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout() && registered:
		return closeWith(0, contract.ClosePingTimeout, err)
	default:
		return closeWith(0, contract.ResultClientGone, err)
	}
}

// relayToClient copies relay frames to the client. While idle it holds no
// pooled buffer (see pumpIO). Each binary message carries
// whole frames only: what one read returned (frames already there) is
// packed up to coalesceLimit, and a frame never waits for a later one.
func (s *session) relayToClient() {
	err := s.copyRelay()
	if err == errParked {
		return // the poller holds the direction (park.go)
	}
	defer s.relayRun.Done()
	if s.ended() {
		return
	}
	var ce *closeError
	if errors.As(err, &ce) {
		s.end(ce)
		return
	}
	s.end(closeWith(websocket.CloseInternalServerErr, contract.CloseRelayLost, err))
}

func (s *session) copyRelay() error {
	for {
		// Waits holding no pooled buffer when nothing is pending; completes
		// a partial frame in place otherwise.
		if err := s.fromRelay.readInto(&s.out); err != nil {
			if err = s.relayIdle(err); err != nil {
				return err
			}
			continue
		}
		for s.out.n > 0 {
			buf := *s.out.b
			end, err := wholeFrames(buf[:s.out.n], coalesceLimit)
			if err != nil {
				return err
			}
			if end == 0 {
				break // the rest of a frame is still on its way
			}
			if err := s.writeClient(buf[:end]); err != nil {
				return err
			}
			s.out.n = copy(buf, buf[end:s.out.n])
		}
	}
}

// writeClient sends one binary message of whole frames, counted per run
// of frames of one type (see frameCounts).
func (s *session) writeClient(p []byte) error {
	c := &s.toClientCounts
	for off := 0; off < len(p); {
		t, bodyLen, _ := relayproto.ParseHeader([relayproto.HeaderSize]byte(p[off : off+relayproto.HeaderSize]))
		size := relayproto.HeaderSize + bodyLen
		c.frame(t, size)
		off += size
	}
	c.message()
	c.flush()
	s.relayLast = time.Now()
	if err := s.writeMessage(p, s.relayLast.Add(s.srv.cfg.WriteTimeout)); err != nil {
		return closeWith(0, contract.ResultClientWriteFailed, err)
	}
	s.bytesToClient.Add(int64(len(p)))
	return nil
}

// wholeFrames returns the length of the longest run of whole frames at the
// start of p that fits in limit (at least one whole frame if p starts with
// one). It fails on a header the relay must never send.
func wholeFrames(p []byte, limit int) (int, error) {
	off := 0
	for len(p)-off >= relayproto.HeaderSize {
		_, bodyLen, err := relayproto.ParseHeader([relayproto.HeaderSize]byte(p[off : off+relayproto.HeaderSize]))
		if err != nil {
			return 0, err
		}
		size := relayproto.HeaderSize + bodyLen
		if len(p)-off < size || (off > 0 && off+size > limit) {
			break
		}
		off += size
	}
	return off, nil
}
