// Package relayproto is the WireKube relay frame format (WireKube v0.0.17),
// byte-compatible with the raw TCP relay. It imports nothing of the servers.
//
// Every frame on the wire is
//
//	[4 bytes big-endian N][1 byte type][N-1 bytes body]
//
// N counts the type byte, so a valid frame has 1 <= N <= MaxFrameSize.
package relayproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

const (
	// MaxFrameSize is the largest N (type byte plus body) the relay accepts.
	MaxFrameSize = 65536
	// MaxBodySize is the largest body of a valid frame.
	MaxBodySize = MaxFrameSize - 1
	// HeaderSize is the length prefix plus the type byte.
	HeaderSize = 5
	// KeySize is the size of a WireGuard public key.
	KeySize = 32
)

// Sentinel errors of the frame reader. Both are returned before any body
// byte is read or allocated.
var (
	ErrEmptyFrame    = errors.New("relayproto: frame length is zero")
	ErrFrameTooLarge = errors.New("relayproto: frame length exceeds 65536")
)

// Frame is one relay frame. Body may alias a reader's buffer: see ReadFrame.
type Frame struct {
	Type FrameType
	Body []byte
}

// ParseHeader decodes a frame header and returns the body length. It fails
// with ErrEmptyFrame or ErrFrameTooLarge (wrapped with the length) so a
// caller can reject a frame before allocating for it.
func ParseHeader(hdr [HeaderSize]byte) (FrameType, int, error) {
	n := binary.BigEndian.Uint32(hdr[:4])
	if err := checkLength(n); err != nil {
		return 0, 0, err
	}
	return FrameType(hdr[4]), int(n) - 1, nil
}

func checkLength(n uint32) error {
	switch {
	case n == 0:
		return ErrEmptyFrame
	case n > MaxFrameSize:
		return fmt.Errorf("%w: %d", ErrFrameTooLarge, n)
	}
	return nil
}

// ReadFrame reads one frame from r. The body is read into buf when it fits
// in cap(buf); otherwise a new slice of exactly the declared length is
// allocated. Nothing is allocated before the length is checked. The
// returned Body aliases buf when it fit, so it is valid until buf is reused.
//
// A clean EOF before the first header byte returns io.EOF; EOF inside a
// frame returns io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, buf []byte) (Frame, error) {
	var hdr [HeaderSize]byte
	return readFrame(r, &hdr, buf)
}

// readFrame takes the header scratch space from the caller: passed to
// io.ReadFull through an interface it escapes, so a Reader keeps its own to
// read a frame without allocating.
func readFrame(r io.Reader, hdr *[HeaderSize]byte, buf []byte) (Frame, error) {
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Frame{}, err
	}
	t, n, err := ParseHeader(*hdr)
	if err != nil {
		return Frame{}, err
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	body := buf[:n]
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	return Frame{Type: t, Body: body}, nil
}

// Reader reads frames from a stream into one reusable buffer that grows to
// the largest body seen (at most MaxBodySize), so an idle or small-frame
// stream holds little memory. A Reader is not safe for concurrent use.
type Reader struct {
	r   io.Reader
	hdr [HeaderSize]byte
	buf []byte
}

// NewReader returns a Reader of r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// ReadFrame reads the next frame. Its Body is valid until the next call.
func (fr *Reader) ReadFrame() (Frame, error) {
	f, err := readFrame(fr.r, &fr.hdr, fr.buf)
	if err == nil && cap(f.Body) > cap(fr.buf) {
		fr.buf = f.Body[:0]
	}
	return f, err
}

// AppendFrame appends the encoding of a frame of type t whose body is the
// concatenation of parts. It panics if the body is larger than MaxBodySize:
// that is a programming error, never a result of input.
func AppendFrame(dst []byte, t FrameType, parts ...[]byte) []byte {
	n := 1
	for _, p := range parts {
		n += len(p)
	}
	if n > MaxFrameSize {
		panic(fmt.Sprintf("relayproto: frame body of %d bytes exceeds %d", n-1, MaxBodySize))
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = append(dst, byte(t))
	for _, p := range parts {
		dst = append(dst, p...)
	}
	return dst
}

// WriteFrame writes one frame with a single Write call, so concurrent
// writers that each call WriteFrame never interleave partial frames on a
// net.Conn. It fails if the body is larger than MaxBodySize.
func WriteFrame(w io.Writer, t FrameType, body []byte) error {
	if len(body) > MaxBodySize {
		return fmt.Errorf("%w: %d", ErrFrameTooLarge, len(body)+1)
	}
	_, err := w.Write(AppendFrame(make([]byte, 0, HeaderSize+len(body)), t, body))
	return err
}
