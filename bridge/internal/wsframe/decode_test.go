package wsframe

import (
	"bytes"
	"errors"
	"testing"

	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// wsFrame and testMask: the client frames of testutil.ClientFrame.
var wsFrame, testMask = testutil.ClientFrame, testutil.WSMask

// errCloseSeen ends decoding at a close frame, as the bridge's session does.
var errCloseSeen = errors.New("test: client sent close")

func TestParseWSHeader(t *testing.T) {
	long := make([]byte, 70000)
	tests := []struct {
		name     string
		in       []byte
		n        int
		length   uint64
		protoErr bool
	}{
		{"short", []byte{0x82}, 0, 0, false},
		{"mask missing from input", []byte{0x82, 0x85, 1, 2}, 0, 0, false},
		{"binary 5", wsFrame(true, OpBinary, []byte("hello"), testMask), 6, 5, false},
		{"16-bit length", wsFrame(true, OpBinary, long[:300], testMask), 8, 300, false},
		{"64-bit length", wsFrame(true, OpBinary, long, testMask), 14, 70000, false},
		{"unmasked", wsFrame(true, OpBinary, []byte("x"), nil), 0, 0, true},
		{"rsv1", append([]byte{0xC2}, wsFrame(true, OpBinary, nil, testMask)[1:]...), 0, 0, true},
		{"opcode 3", wsFrame(true, 0x3, nil, testMask), 0, 0, true},
		{"opcode 0xB", wsFrame(true, 0xB, nil, testMask), 0, 0, true},
		{"fragmented ping", wsFrame(false, OpPing, nil, testMask), 0, 0, true},
		{"long ping", wsFrame(true, OpPing, long[:126], testMask), 0, 0, true},
		{"length msb", append([]byte{0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0}, testMask...), 0, 0, true},
	}
	for _, tt := range tests {
		h, n, err := parseWSHeader(tt.in)
		if errors.Is(err, ErrProtocol) != tt.protoErr || n != tt.n || (n > 0 && h.length != tt.length) {
			t.Errorf("%s: n=%d length=%d err=%v; want n=%d length=%d protocol error %v",
				tt.name, n, h.length, err, tt.n, tt.length, tt.protoErr)
		}
	}
}

// decodeAll runs a decoder over in, chunk bytes at a time, with a small
// output buffer, and returns the payload stream and the control frames.
func decodeAll(in []byte, chunk, dstSize int) ([]byte, []string, int, error) {
	var out []byte
	var controls []string
	messages := 0
	d := Decoder{
		OnControl: func(op byte, p []byte) error {
			controls = append(controls, string(rune('0'+op))+string(p))
			if op == OpClose {
				return errCloseSeen
			}
			return nil
		},
		OnMessage: func() error { messages++; return nil },
	}
	var pending []byte
	dst := make([]byte, dstSize)
	for len(in) > 0 || len(pending) > 0 {
		k := min(chunk, len(in))
		pending = append(pending, in[:k]...)
		in = in[k:]
		for {
			used, wrote, err := d.Decode(pending, dst)
			out = append(out, dst[:wrote]...)
			pending = pending[used:]
			if err != nil {
				return out, controls, messages, err
			}
			if used == 0 && wrote == 0 {
				break
			}
		}
		if k == 0 {
			break // input exhausted with an incomplete frame
		}
	}
	return out, controls, messages, nil
}

// decodeInPlace decodes as the session does: one buffer, the decoded
// stream at its start, the undecoded bytes after it, chunk bytes arriving
// at a time. It returns the payload stream.
func decodeInPlace(in []byte, chunk int) ([]byte, error) {
	d := Decoder{
		OnControl: func(op byte, p []byte) error {
			if op == OpClose {
				return errCloseSeen
			}
			return nil
		},
		OnMessage: func() error { return nil },
	}
	buf := make([]byte, len(in)+1)
	var out []byte
	inLen, n := 0, 0
	for len(in) > 0 {
		k := copy(buf[n:], in[:min(chunk, len(in))])
		in, n = in[k:], n+k
		start := inLen
		used, wrote, err := d.Decode(buf[start:n], buf[start:])
		inLen += wrote
		// The "filter" takes a multiple of 3 bytes, leaving a tail behind
		// like an incomplete frame.
		take := inLen - inLen%3
		out = append(out, buf[:take]...)
		inLen = copy(buf, buf[take:inLen])
		n = inLen + copy(buf[inLen:], buf[start+used:n])
		if err != nil {
			return append(out, buf[:inLen]...), err
		}
	}
	return append(out, buf[:inLen]...), nil
}

func TestWSDecoder(t *testing.T) {
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	big := bytes.Repeat([]byte("0123456789"), 7000)
	tests := []struct {
		name     string
		in       []byte
		out      []byte
		controls int
		messages int
		err      error
	}{
		{"one message", wsFrame(true, OpBinary, []byte("abc"), testMask), []byte("abc"), 0, 1, nil},
		{"fragments with a ping between", cat(wsFrame(false, OpBinary, []byte("ab"), testMask),
			wsFrame(true, OpPing, []byte("p"), testMask), wsFrame(false, OpContinuation, []byte("cd"), testMask),
			wsFrame(true, OpContinuation, []byte("e"), testMask)), []byte("abcde"), 1, 1, nil},
		{"two messages", cat(wsFrame(true, OpBinary, []byte("ab"), testMask), wsFrame(true, OpBinary, []byte("cd"), testMask)),
			[]byte("abcd"), 0, 2, nil},
		{"big message", wsFrame(true, OpBinary, big, testMask), big, 0, 1, nil},
		{"empty message", wsFrame(true, OpBinary, nil, testMask), nil, 0, 1, nil},
		{"text", wsFrame(true, OpText, []byte("hi"), testMask), nil, 0, 0, ErrText},
		{"continuation first", wsFrame(true, OpContinuation, []byte("x"), testMask), nil, 0, 0, ErrProtocol},
		{"binary inside fragmented", cat(wsFrame(false, OpBinary, []byte("a"), testMask),
			wsFrame(true, OpBinary, []byte("b"), testMask)), []byte("a"), 0, 1, ErrProtocol},
		{"close stops", cat(wsFrame(true, OpBinary, []byte("a"), testMask), wsFrame(true, OpClose, []byte{3, 232}, testMask),
			wsFrame(true, OpBinary, []byte("b"), testMask)), []byte("a"), 1, 1, errCloseSeen},
	}
	for _, tt := range tests {
		for _, chunk := range []int{1, 3, 64, 1 << 20} {
			for _, dstSize := range []int{1, 7, 1 << 17} {
				out, controls, messages, err := decodeAll(tt.in, chunk, dstSize)
				if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) || !bytes.Equal(out, tt.out) ||
					len(controls) != tt.controls || messages != tt.messages {
					t.Fatalf("%s (chunk %d, dst %d): out %d bytes, %d controls, %d messages, %v; want %d, %d, %d, %v",
						tt.name, chunk, dstSize, len(out), len(controls), messages, err, len(tt.out), tt.controls, tt.messages, tt.err)
				}
			}
			out, err := decodeInPlace(tt.in, chunk)
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) || !bytes.Equal(out, tt.out) {
				t.Fatalf("%s (in place, chunk %d): out %d bytes, %v; want %d, %v", tt.name, chunk, len(out), err, len(tt.out), tt.err)
			}
		}
	}
}

// FuzzWSDecode: messages encoded with fragmentation, pings and masks decode
// to the same payload stream however the bytes are split; arbitrary input
// never panics and never yields more bytes than it holds.
func FuzzWSDecode(f *testing.F) {
	f.Add([]byte("hello world"), uint8(3), uint8(5), []byte{0x82, 0x80, 1, 2, 3, 4})
	f.Add(bytes.Repeat([]byte{7}, 300), uint8(100), uint8(1), wsFrame(true, OpText, []byte("x"), testMask))
	// Client close frames: valid, 1-byte, invalid code, reason not UTF-8.
	f.Add([]byte("x"), uint8(0), uint8(2), wsFrame(true, OpClose, []byte{0x03, 0xe8, 'o', 'k'}, testMask))
	f.Add([]byte("x"), uint8(1), uint8(0), wsFrame(true, OpClose, []byte{0x03}, testMask))
	f.Add([]byte("x"), uint8(2), uint8(1), wsFrame(true, OpClose, []byte{0x13, 0x88}, testMask))
	f.Add([]byte("x"), uint8(4), uint8(9), wsFrame(true, OpClose, []byte{0x03, 0xe8, 0xff}, testMask))
	f.Fuzz(func(t *testing.T, payload []byte, frag, chunk uint8, arbitrary []byte) {
		var in []byte
		fragSize := int(frag) + 1
		for i, first := 0, true; first || i < len(payload); first = false {
			end := min(i+fragSize, len(payload))
			op := byte(OpContinuation)
			if first {
				op = OpBinary
			}
			in = append(in, wsFrame(end == len(payload), op, payload[i:end], []byte{frag, chunk, 3, 4})...)
			if frag%3 == 0 {
				in = append(in, wsFrame(true, OpPing, payload[i:min(end, i+10)], testMask)...)
			}
			i = end
		}
		out, _, messages, err := decodeAll(in, int(chunk)+1, int(frag)+1)
		if err != nil || !bytes.Equal(out, payload) || messages != 1 {
			t.Fatalf("round trip: %d of %d bytes, %d messages, %v", len(out), len(payload), messages, err)
		}
		if out, err := decodeInPlace(in, int(chunk)+1); err != nil || !bytes.Equal(out, payload) {
			t.Fatalf("round trip in place: %d of %d bytes, %v", len(out), len(payload), err)
		}
		out, _, _, errA := decodeAll(arbitrary, int(chunk)+1, 64)
		if len(out) > len(arbitrary) {
			t.Fatalf("decoded %d bytes from %d", len(out), len(arbitrary))
		}
		if inPlace, errB := decodeInPlace(arbitrary, int(chunk)+1); !bytes.Equal(inPlace, out) || (errA == nil) != (errB == nil) {
			t.Fatalf("in place decodes %d bytes (%v), into another buffer %d (%v)", len(inPlace), errB, len(out), errA)
		}
	})
}
