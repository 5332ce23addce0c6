package relayproto

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReadFrame feeds arbitrary bytes to the frame reader: it must never
// panic, never return a body longer than MaxBodySize, and what it accepts
// must re-encode to exactly the bytes it consumed.
func FuzzReadFrame(f *testing.F) {
	for _, tc := range goldenFrames {
		f.Add(unhex(f, tc.wire))
	}
	f.Add(unhex(f, "00000000 01"))
	f.Add(unhex(f, "00010001 02"))
	f.Add(unhex(f, "00000005 02 0102"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		fr, err := ReadFrame(r, make([]byte, 0, 16))
		if err != nil {
			if !errors.Is(err, ErrEmptyFrame) && !errors.Is(err, ErrFrameTooLarge) &&
				err != io.EOF && err != io.ErrUnexpectedEOF {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if len(fr.Body) > MaxBodySize {
			t.Fatalf("body of %d bytes", len(fr.Body))
		}
		consumed := len(in) - r.Len()
		if got := AppendFrame(nil, fr.Type, fr.Body); !bytes.Equal(got, in[:consumed]) {
			t.Fatalf("re-encoding %x differs from input %x", got, in[:consumed])
		}
	})
}

// FuzzRoundTrip writes frames built from arbitrary types and bodies and
// reads them back through a Reader.
func FuzzRoundTrip(f *testing.F) {
	for _, tc := range goldenFrames {
		f.Add(byte(tc.t), unhex(f, tc.body), 1)
	}
	f.Add(byte(0x02), []byte{}, 3)
	f.Fuzz(func(t *testing.T, typ byte, body []byte, repeat int) {
		if len(body) > MaxBodySize {
			body = body[:MaxBodySize]
		}
		repeat = 1 + (repeat&0xff)%4
		var wire bytes.Buffer
		for range repeat {
			if err := WriteFrame(&wire, FrameType(typ), body); err != nil {
				t.Fatal(err)
			}
		}
		r := NewReader(&wire)
		for range repeat {
			fr, err := r.ReadFrame()
			if err != nil || fr.Type != FrameType(typ) || !bytes.Equal(fr.Body, body) {
				t.Fatalf("round trip: %#v %x %v", fr.Type, fr.Body, err)
			}
		}
		if _, err := r.ReadFrame(); err != io.EOF {
			t.Fatalf("trailing: %v", err)
		}
	})
}

// FuzzParseKey checks that any accepted key string is the canonical
// encoding of the key it decodes to.
func FuzzParseKey(f *testing.F) {
	k := key(1)
	f.Add(k.Base64())
	f.Add("")
	f.Add("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	f.Add("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB=")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err == nil && k.Base64() != s {
			t.Fatalf("accepted %q, which encodes back to %q", s, k.Base64())
		}
	})
}
