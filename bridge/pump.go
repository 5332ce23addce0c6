package bridge

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// clientToRelay reads the client's binary messages as one byte stream,
// filters it frame by frame and writes verified frames to the relay. It
// returns once the client side is done; every way out calls end first.
// After end it keeps reading, discarding, until the client answers the
// close frame or the close grace expires, so the close is clean.
func (s *session) clientToRelay() {
	for {
		mt, r, err := s.ws.NextReader()
		if err != nil {
			s.end(clientReadClose(err, s.filter.registered))
			return
		}
		if s.ended() {
			_, _ = io.Copy(io.Discard, r)
			continue
		}
		s.refreshReadDeadline()
		s.srv.metrics.messagesToRelay.Inc()
		if mt != websocket.BinaryMessage {
			s.end(closeWith(websocket.CloseUnsupportedData, contract.CloseTextMessage, nil))
			continue
		}
		if cerr := s.pumpMessage(r); cerr != nil {
			s.end(cerr)
		}
	}
}

// pumpMessage feeds one message through the filter. Bytes of a frame that
// continues in the next message stay in s.in; an empty s.in goes back to
// the pool before the next (possibly long) wait.
func (s *session) pumpMessage(r io.Reader) *closeError {
	wasRegistered := s.filter.registered
	for {
		buf := s.take(&s.in)
		n, rerr := r.Read(buf[s.in.n:])
		s.in.n += n
		used, err := s.filter.scan(buf[:s.in.n], s.writeRelay)
		if err != nil {
			var ce *closeError
			if errors.As(err, &ce) {
				return ce
			}
			return closeWith(websocket.CloseInternalServerErr, contract.CloseRelayLost, err)
		}
		s.in.n = copy(buf, buf[used:s.in.n])
		if !wasRegistered && s.filter.registered {
			wasRegistered = true
			s.registered()
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return clientReadClose(rerr, wasRegistered)
		}
	}
	s.release(&s.in)
	return nil
}

// writeRelay sends verified client bytes to the relay with the write
// timeout, so a stuck relay ends only this session.
func (s *session) writeRelay(p []byte) error {
	if err := s.relay.SetWriteDeadline(time.Now().Add(s.srv.cfg.WriteTimeout)); err != nil {
		return err
	}
	n, err := s.relay.Write(p)
	s.bytesToRelay += int64(n)
	return err
}

// clientReadClose classifies the error that ended reading the client.
func clientReadClose(err error, registered bool) *closeError {
	var ce *websocket.CloseError
	var ne net.Error
	switch {
	case errors.As(err, &ce) && ce.Code != websocket.CloseAbnormalClosure: // 1006: EOF, no close frame
		return closeWith(0, resultClientClosed, err)
	case errors.As(err, &ne) && ne.Timeout() && registered:
		return closeWith(0, contract.ClosePingTimeout, err)
	default:
		return closeWith(0, resultClientGone, err)
	}
}

// relayToClient copies relay frames to the client. While idle it waits on
// a small array and holds no pooled buffer. Each binary message carries
// whole frames only: what one read returned (frames already there) is
// packed up to coalesceLimit, and a frame never waits for a later one.
func (s *session) relayToClient() {
	err := s.copyRelay()
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
		if s.out.n == 0 {
			if err := s.waitRelay(); err != nil {
				return err
			}
			continue
		}
		buf := *s.out.b
		end, err := wholeFrames(buf[:s.out.n], coalesceLimit)
		if err != nil {
			return err
		}
		if end == 0 {
			n, err := s.relay.Read(buf[s.out.n:])
			s.out.n += n
			if err != nil {
				return err
			}
			continue
		}
		if err := s.writeClient(buf[:end]); err != nil {
			return err
		}
		s.out.n = copy(buf, buf[end:s.out.n])
	}
}

// waitRelay is the idle wait: it reads into the session's small array, so
// no pooled buffer is held while the relay is quiet. Small frames that
// arrive whole (keepalives, probes, pings) go out from there; otherwise the
// bytes move to a pooled buffer to be completed.
func (s *session) waitRelay() error {
	s.release(&s.out)
	n, err := s.relay.Read(s.idle[:])
	if n == 0 {
		if err == nil {
			return nil
		}
		return err
	}
	if end, ferr := wholeFrames(s.idle[:n], coalesceLimit); ferr == nil && end == n {
		if werr := s.writeClient(s.idle[:n]); werr != nil {
			return werr
		}
		return err
	}
	s.out.n = copy(s.take(&s.out), s.idle[:n])
	return err
}

// writeClient sends one binary message of whole frames.
func (s *session) writeClient(p []byte) error {
	m := s.srv.metrics
	for off := 0; off < len(p); {
		t, bodyLen, _ := relayproto.ParseHeader([relayproto.HeaderSize]byte(p[off : off+relayproto.HeaderSize]))
		size := relayproto.HeaderSize + bodyLen
		m.toClient[t].add(size)
		off += size
	}
	m.messagesToClient.Inc()
	if err := s.ws.SetWriteDeadline(time.Now().Add(s.srv.cfg.WriteTimeout)); err != nil {
		return err
	}
	if err := s.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return closeWith(0, resultClientStuck, err)
	}
	s.bytesToClient += int64(len(p))
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
