package bridge

import (
	"errors"
	"fmt"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// closeError ends a session. Code is the WebSocket close code sent to the
// client, or 0 when no close frame is sent (the client closed, vanished or
// is stuck). Reason is the stable code sent in the close frame, logged and
// used as the sessions_total result label.
type closeError struct {
	code   int
	reason contract.Reason
	err    error // the cause, for the log; may be nil
}

func (e *closeError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("%s (%d): %v", e.reason, e.code, e.err)
	}
	return fmt.Sprintf("%s (%d)", e.reason, e.code)
}

func (e *closeError) Unwrap() error { return e.err }

func closeWith(code int, reason contract.Reason, err error) *closeError {
	return &closeError{code: code, reason: reason, err: err}
}

// frameFilter enforces the client -> relay frame rules on a byte stream.
// It sees only headers and whole frames; it never allocates. The zero
// registered state expects Register first. Not safe for concurrent use.
type frameFilter struct {
	key        relayproto.Key // the key the proxy vouched for
	registered bool
	// onFrame, if set, is called for every whole frame: forwarded or dropped.
	onFrame func(t relayproto.FrameType, size int, forwarded bool)
	// onRegister, if set, is called once Register is verified, before it
	// is forwarded; a close error it returns refuses the Register (it is
	// not forwarded, the filter stays unregistered).
	onRegister func() *closeError
}

// scan consumes the whole frames at the start of p. Runs of frames to pass
// on are handed to forward as one slice of the exact client bytes (valid
// only during the call); dropped frames are skipped. It returns the number
// of bytes consumed; the rest of p is an incomplete frame to complete with
// more input. On a violation the whole frames before it are still passed
// on (so the result does not depend on how the stream was split into
// messages) and the error is a *closeError. A header is judged as soon as its
// 5 bytes are there, before the body arrives, so an oversized or forbidden
// frame is refused at once; a length of 0 or over the maximum already at
// its 4th byte.
func (f *frameFilter) scan(p []byte, forward func([]byte) error) (int, error) {
	off, pending := 0, 0 // pending: start of the run not yet forwarded
	for len(p)-off >= relayproto.HeaderSize {
		t, bodyLen, err := relayproto.ParseHeader([relayproto.HeaderSize]byte(p[off : off+relayproto.HeaderSize]))
		if err != nil {
			return off, firstErr(flush(p[pending:off], forward), headerClose(err))
		}
		keep, cerr := f.judge(t, bodyLen)
		if cerr != nil {
			return off, firstErr(flush(p[pending:off], forward), cerr)
		}
		size := relayproto.HeaderSize + bodyLen
		if len(p)-off < size {
			break
		}
		if !f.registered {
			if cerr := f.verifyRegister(p[off+relayproto.HeaderSize : off+size]); cerr != nil {
				return off, cerr
			}
		}
		if !keep {
			if err := flush(p[pending:off], forward); err != nil {
				return off, err
			}
			pending = off + size
		}
		if f.onFrame != nil {
			f.onFrame(t, size, keep)
		}
		off += size
	}
	if rest := len(p) - off; rest >= lengthPrefixSize && rest < relayproto.HeaderSize {
		if err := checkLengthPrefix(p[off : off+lengthPrefixSize]); err != nil {
			return off, firstErr(flush(p[pending:off], forward), headerClose(err))
		}
	}
	return off, flush(p[pending:off], forward)
}

// lengthPrefixSize is the frame's length field: a length of 0 or over the
// maximum is refused as soon as these 4 bytes are there, without waiting
// for the type byte.
const lengthPrefixSize = 4

func checkLengthPrefix(p []byte) error {
	var hdr [relayproto.HeaderSize]byte
	copy(hdr[:], p[:lengthPrefixSize])
	_, _, err := relayproto.ParseHeader(hdr)
	return err
}

// firstErr prefers a forwarding failure: the relay is gone either way.
func firstErr(forwardErr error, cerr *closeError) error {
	if forwardErr != nil {
		return forwardErr
	}
	return cerr
}

func flush(run []byte, forward func([]byte) error) error {
	if len(run) == 0 {
		return nil
	}
	return forward(run)
}

func headerClose(err error) *closeError {
	if errors.Is(err, relayproto.ErrFrameTooLarge) {
		return closeWith(websocket.CloseMessageTooBig, contract.CloseFrameTooLarge, err)
	}
	return closeWith(websocket.ClosePolicyViolation, contract.CloseFrameMalformed, err)
}

// judge decides a frame from its header: forward it, drop it (unknown
// type, counted) or close the session.
func (f *frameFilter) judge(t relayproto.FrameType, bodyLen int) (keep bool, _ *closeError) {
	if !f.registered {
		switch {
		case t != relayproto.TypeRegister:
			return false, closeWith(websocket.ClosePolicyViolation, contract.CloseRegisterMissing,
				fmt.Errorf("first frame is %#v", t))
		case bodyLen != relayproto.KeySize:
			return false, closeWith(websocket.ClosePolicyViolation, contract.CloseRegisterMalformed,
				fmt.Errorf("register body of %d bytes", bodyLen))
		}
		return true, nil
	}
	switch {
	case t == relayproto.TypeRegister:
		return false, closeWith(websocket.ClosePolicyViolation, contract.CloseRegisterRepeated, nil)
	case t == relayproto.TypeData, t == relayproto.TypeKeepalive, t == relayproto.TypeNATProbe,
		t == relayproto.TypeBimodalHint, t == relayproto.TypeRelayProbe, t == relayproto.TypeExternalData:
		return true, nil
	case t.Known(): // control 0x10-0x13, relay-to-relay 0x21-0x23, Error
		return false, closeWith(websocket.ClosePolicyViolation, contract.CloseFrameForbidden,
			fmt.Errorf("frame type %#v", t))
	default:
		return false, nil
	}
}

// verifyRegister compares the Register body with the vouched key in
// constant time. Only after this passes is anything sent to the relay.
func (f *frameFilter) verifyRegister(body []byte) *closeError {
	k, err := relayproto.ParseRegister(body)
	if err != nil {
		return closeWith(websocket.ClosePolicyViolation, contract.CloseRegisterMalformed, err)
	}
	if !k.Equal(f.key) {
		return closeWith(websocket.ClosePolicyViolation, contract.CloseRegisterKeyMismatch,
			fmt.Errorf("registered key %s, vouched key %s", k, f.key))
	}
	if f.onRegister != nil {
		if ce := f.onRegister(); ce != nil {
			return ce
		}
	}
	f.registered = true
	return nil
}
