package refrelay

import (
	"errors"
	"fmt"

	"github.com/wirekube/relay-ws/relayproto"
)

// Errors of the test hooks.
var (
	ErrNotRegistered = errors.New("refrelay: key has no live session")
	ErrQueueFull     = errors.New("refrelay: destination queue full, frame dropped")
)

// Inject is a test hook: it sends one frame of any type, as the relay, to
// the live session of k, through the same bounded queue as forwarded
// frames. Tests use it for what the real relay sends on its own
// (RelayProbe, Error) or to push frames a client could not (large or
// unknown types). The body is copied.
func (s *Server) Inject(k relayproto.Key, t relayproto.FrameType, body []byte) error {
	if len(body) > relayproto.MaxBodySize {
		return fmt.Errorf("refrelay: inject: %w: %d", relayproto.ErrFrameTooLarge, len(body)+1)
	}
	dst := s.lookup(k)
	if dst == nil {
		return ErrNotRegistered
	}
	frame := relayproto.AppendFrame(make([]byte, 0, relayproto.HeaderSize+len(body)), t, body)
	if !s.enqueue(dst, frame) {
		return ErrQueueFull
	}
	return nil
}

// Disconnect is a test hook: it closes the live session of k as the relay
// would on its own (for example to test what a client does when the relay
// goes away). It reports whether there was a session to close.
func (s *Server) Disconnect(k relayproto.Key) bool {
	ss := s.lookup(k)
	if ss == nil {
		return false
	}
	ss.close()
	return true
}
