// Package wsframe is the WebSocket frame format the bridge reads and
// writes itself (RFC 6455): a client's frames decoded into the payload
// stream of its binary messages, unmasked in place, its close payload
// checked, and the header of a server's binary frame. It imports nothing
// of the bridge; every client byte it reads is untrusted (fuzzed).
package wsframe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// WebSocket opcodes (RFC 6455 section 5.2).
const (
	OpContinuation = 0x0
	OpText         = 0x1
	OpBinary       = 0x2
	OpClose        = 0x8
	OpPing         = 0x9
	OpPong         = 0xA
)

// ErrProtocol marks a client frame that breaks RFC 6455 (close 1002).
var ErrProtocol = errors.New("wsframe: websocket protocol error")

// ErrText marks a text message (close 1003).
var ErrText = errors.New("wsframe: text message")

// wsHeader is a decoded client frame header.
type wsHeader struct {
	fin    bool
	op     byte
	length uint64
	mask   [4]byte
}

// parseWSHeader decodes the frame header at the start of p. It returns the
// header size, or 0 when p is too short to tell. A client frame must be
// masked and use no reserved bits or opcodes; a control frame must be final
// and at most 125 bytes. The declared length is only a count: nothing is
// allocated for it.
func parseWSHeader(p []byte) (wsHeader, int, error) {
	if len(p) < 2 {
		return wsHeader{}, 0, nil
	}
	h := wsHeader{fin: p[0]&0x80 != 0, op: p[0] & 0x0F}
	switch {
	case p[0]&0x70 != 0:
		return h, 0, fmt.Errorf("%w: reserved bits set", ErrProtocol)
	case p[1]&0x80 == 0:
		return h, 0, fmt.Errorf("%w: client frame not masked", ErrProtocol)
	}
	n, size := 2, uint64(p[1]&0x7F)
	switch size {
	case 126:
		n = 4
	case 127:
		n = 10
	}
	if len(p) < n+4 {
		return h, 0, nil
	}
	switch n {
	case 4:
		size = uint64(binary.BigEndian.Uint16(p[2:4]))
	case 10:
		size = binary.BigEndian.Uint64(p[2:10])
		if size>>63 != 0 {
			return h, 0, fmt.Errorf("%w: length over 2^63", ErrProtocol)
		}
	}
	h.length = size
	copy(h.mask[:], p[n:n+4])
	switch h.op {
	case OpContinuation, OpText, OpBinary:
	case OpClose, OpPing, OpPong:
		if !h.fin || h.length > 125 {
			return h, 0, fmt.Errorf("%w: fragmented or long control frame", ErrProtocol)
		}
	default:
		return h, 0, fmt.Errorf("%w: opcode %#x", ErrProtocol, h.op)
	}
	return h, n + 4, nil
}

// Decoder turns the client's WebSocket frames into the payload byte
// stream of its binary messages. Not safe for concurrent use.
type Decoder struct {
	remaining uint64 // payload bytes left in the current data frame
	mask      [4]byte
	maskPos   int
	inMessage bool // a message continues in later frames
	// Discard drops the payload of data frames (consumed, not written)
	// from the next Decode on: the session has ended and reads on only to
	// its close.
	Discard bool
	// OnControl handles a whole, unmasked control frame; OnMessage is told
	// of each new binary message (nil: not told). Either may end decoding
	// with an error.
	OnControl func(op byte, payload []byte) error
	OnMessage func() error
}

// Decode consumes frames from p and unmasks binary message payload into
// dst. It stops when p is used up, when dst is full or when the rest of p
// is an incomplete header or control frame, and returns how many bytes of
// p it consumed and of dst it wrote. Control frame payloads are unmasked
// in place in p. dst may start where p starts (decoding in place): the
// payload is then written at or before where it was read, never over
// bytes not yet consumed.
func (d *Decoder) Decode(p, dst []byte) (consumed, written int, err error) {
	for consumed < len(p) {
		if d.remaining > 0 {
			k := min(d.remaining, uint64(len(p)-consumed))
			if !d.Discard {
				k = min(k, uint64(len(dst)-written))
				if k == 0 {
					return consumed, written, nil
				}
				d.unmask(dst[written:written+int(k)], p[consumed:consumed+int(k)])
				written += int(k)
			}
			consumed += int(k)
			d.remaining -= k
			continue
		}
		h, n, err := parseWSHeader(p[consumed:])
		if err != nil || n == 0 {
			return consumed, written, err
		}
		if h.op >= OpClose {
			if uint64(len(p)-consumed-n) < h.length {
				return consumed, written, nil
			}
			payload := p[consumed+n : consumed+n+int(h.length)]
			maskInPlace(payload, h.mask)
			consumed += n + int(h.length)
			if err := d.OnControl(h.op, payload); err != nil {
				return consumed, written, err
			}
			continue
		}
		if err := d.startData(h); err != nil {
			return consumed, written, err
		}
		consumed += n
	}
	return consumed, written, nil
}

// startData checks a data frame against the message in progress.
func (d *Decoder) startData(h wsHeader) error {
	switch {
	case h.op == OpContinuation && !d.inMessage:
		return fmt.Errorf("%w: continuation without a message", ErrProtocol)
	case h.op != OpContinuation && d.inMessage:
		return fmt.Errorf("%w: new message inside a fragmented one", ErrProtocol)
	case h.op == OpText:
		return ErrText
	case h.op == OpBinary && d.OnMessage != nil:
		if err := d.OnMessage(); err != nil {
			return err
		}
	}
	d.inMessage = !h.fin
	d.remaining, d.mask, d.maskPos = h.length, h.mask, 0
	return nil
}

// unmask XORs src with the frame's mask into dst, 32 bytes per step as four
// 8-byte words with the mask rotated to the current phase and repeated.
// dst may be src itself or start before it in the same buffer (the decoder
// unmasks in place, closing the gaps the frame headers leave): each word is
// read before the bytes it covers are written, so a write never clobbers
// input not yet read.
func (d *Decoder) unmask(dst, src []byte) {
	n, pos := len(src), d.maskPos&3
	dst = dst[:n]
	var m [8]byte
	for j := range m {
		m[j] = d.mask[(pos+j)&3]
	}
	key := binary.LittleEndian.Uint64(m[:])
	i := 0
	for ; n-i >= 32; i += 32 {
		s, o := src[i:i+32:i+32], dst[i:i+32:i+32]
		binary.LittleEndian.PutUint64(o[0:8], binary.LittleEndian.Uint64(s[0:8])^key)
		binary.LittleEndian.PutUint64(o[8:16], binary.LittleEndian.Uint64(s[8:16])^key)
		binary.LittleEndian.PutUint64(o[16:24], binary.LittleEndian.Uint64(s[16:24])^key)
		binary.LittleEndian.PutUint64(o[24:32], binary.LittleEndian.Uint64(s[24:32])^key)
	}
	for ; n-i >= 8; i += 8 {
		binary.LittleEndian.PutUint64(dst[i:i+8], binary.LittleEndian.Uint64(src[i:i+8])^key)
	}
	for ; i < n; i++ { // i is a multiple of 8: the mask phase is unchanged
		dst[i] = src[i] ^ m[i&3]
	}
	d.maskPos = (pos + n) & 3
}

func maskInPlace(b []byte, mask [4]byte) {
	for i := range b {
		b[i] ^= mask[i&3]
	}
}

// ParseClientClose checks a client's close frame payload (RFC 6455 section
// 5.5.1 and 7.4) and returns the status code to echo. An empty payload has
// no code (1005, echoed as an empty close). A 1-byte payload, a code no
// endpoint may send and a reason that is not UTF-8 are protocol errors
// (close 1002).
func ParseClientClose(payload []byte) (int, error) {
	switch len(payload) {
	case 0:
		return CloseNoStatus, nil
	case 1:
		return 0, fmt.Errorf("%w: 1-byte close payload", ErrProtocol)
	}
	code := int(binary.BigEndian.Uint16(payload))
	if !validCloseCode(code) {
		return 0, fmt.Errorf("%w: close code %d", ErrProtocol, code)
	}
	if !utf8.Valid(payload[2:]) {
		return 0, fmt.Errorf("%w: close reason is not UTF-8", ErrProtocol)
	}
	return code, nil
}

// CloseNoStatus (1005) is the code for a close frame without one; it is
// never sent on the wire.
const CloseNoStatus = 1005

// validCloseCode reports whether a peer may send code in a close frame:
// the defined codes 1000-1003 and 1007-1011, the IANA-registered 1012-1014,
// and the application range 3000-4999. 1004-1006 and 1015 are reserved or
// local-only; everything else below 3000 is reserved, 5000 and above are
// not codes at all.
func validCloseCode(code int) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1014:
		return true
	default:
		return code >= 3000 && code <= 4999
	}
}

// AppendServerHeader appends the header of a final, unmasked binary frame
// of n payload bytes (RFC 6455 section 5.2).
func AppendServerHeader(b []byte, n int) []byte {
	b = append(b, 0x80|OpBinary)
	switch {
	case n < 126:
		return append(b, byte(n))
	case n <= 0xFFFF:
		return binary.BigEndian.AppendUint16(append(b, 126), uint16(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, 127), uint64(n))
	}
}
