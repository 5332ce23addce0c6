package relayproto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
)

func key(b byte) Key {
	var k Key
	for i := range k {
		k[i] = b + byte(i)
	}
	return k
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// goldenFrames is one frame of every type with its exact wire bytes.
var goldenFrames = []struct {
	name string
	t    FrameType
	body string // hex
	wire string // hex
}{
	{"register", TypeRegister, "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20",
		"00000021 01 0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"},
	{"data", TypeData, "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20 cafe",
		"00000023 02 0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20 cafe"},
	{"keepalive", TypeKeepalive, "", "00000001 03"},
	{"nat_probe", TypeNATProbe, "c0000201 0d96", "00000007 04 c0000201 0d96"},
	{"bimodal_hint", TypeBimodalHint, "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20",
		"00000021 05 0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"},
	{"relay_probe", TypeRelayProbe, "0011223344556677", "00000009 06 0011223344556677"},
	{"forwarder_register", TypeForwarderRegister,
		"1f90 0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20 2122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f40",
		"00000043 10 1f90 0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20 2122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f40"},
	{"forwarder_unregister", TypeForwarderUnregister, "1f90", "00000003 11 1f90"},
	{"forwarder_stats", TypeForwarderStats, "1f90", "00000003 12 1f90"},
	{"ingress_probe", TypeIngressProbe, "0001 0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20",
		"00000023 13 0001 0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"},
	{"external_data", TypeExternalData, "0011223344556677 0004 0a000001 ff",
		"00000010 20 0011223344556677 0004 0a000001 ff"},
	{"cluster_envelope", TypeClusterEnvelope, "aa", "00000002 21 aa"},
	{"cluster_external_reply", TypeClusterExternalReply, "bb", "00000002 22 bb"},
	{"cluster_external_fanout", TypeClusterExternalFanout, "cc", "00000002 23 cc"},
	{"error", TypeError, hex.EncodeToString([]byte("no")), "00000003 ff 6e6f"},
}

func TestGoldenFrames(t *testing.T) {
	for _, tc := range goldenFrames {
		t.Run(tc.name, func(t *testing.T) {
			body, wire := unhex(t, tc.body), unhex(t, tc.wire)
			if got := AppendFrame(nil, tc.t, body); !bytes.Equal(got, wire) {
				t.Fatalf("AppendFrame = %x, want %x", got, wire)
			}
			var buf bytes.Buffer
			if err := WriteFrame(&buf, tc.t, body); err != nil || !bytes.Equal(buf.Bytes(), wire) {
				t.Fatalf("WriteFrame = %x, %v; want %x", buf.Bytes(), err, wire)
			}
			f, err := ReadFrame(bytes.NewReader(wire), nil)
			if err != nil || f.Type != tc.t || !bytes.Equal(f.Body, body) {
				t.Fatalf("ReadFrame = %#v %x, %v", f.Type, f.Body, err)
			}
			if tc.t.String() != tc.name {
				t.Fatalf("String() = %q, want %q", tc.t.String(), tc.name)
			}
		})
	}
}

func TestReadFrameErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		wire string
		want error
	}{
		{"zero length", "00000000 01", ErrEmptyFrame},
		{"one over max", "00010001 02", ErrFrameTooLarge},
		{"max uint32", "ffffffff 02", ErrFrameTooLarge},
		{"empty stream", "", io.EOF},
		{"short header", "000000", io.ErrUnexpectedEOF},
		{"short body", "00000005 02 0102", io.ErrUnexpectedEOF},
		{"header only", "00000005 02", io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadFrame(bytes.NewReader(unhex(t, tc.wire)), nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestReadFrameMaxSize(t *testing.T) {
	body := bytes.Repeat([]byte{7}, MaxBodySize)
	wire := AppendFrame(nil, TypeData, body)
	f, err := ReadFrame(bytes.NewReader(wire), nil)
	if err != nil || len(f.Body) != MaxBodySize {
		t.Fatalf("max frame: len %d, %v", len(f.Body), err)
	}
	if err := WriteFrame(io.Discard, TypeData, append(body, 0)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("WriteFrame over max: %v", err)
	}
}

func TestReadFrameReusesBuffer(t *testing.T) {
	wire := AppendFrame(AppendFrame(nil, TypeData, make([]byte, 40)), TypeKeepalive)
	buf := make([]byte, 0, 64)
	f, err := ReadFrame(bytes.NewReader(wire), buf)
	if err != nil || &f.Body[0] != &buf[:1][0] {
		t.Fatalf("body does not alias the caller's buffer (err %v)", err)
	}
	src := bytes.NewReader(wire)
	fr := NewReader(src)
	fr.buf = buf
	allocs := testing.AllocsPerRun(100, func() {
		src.Reset(wire)
		if _, err := fr.ReadFrame(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Reader.ReadFrame allocates %v times per frame with a large enough buffer", allocs)
	}
}

func TestReaderGrowsAndKeepsBuffer(t *testing.T) {
	var wire []byte
	for _, n := range []int{0, 10, 1000, 5, MaxBodySize, 3} {
		wire = AppendFrame(wire, TypeData, bytes.Repeat([]byte{byte(n)}, n))
	}
	r := NewReader(bytes.NewReader(wire))
	for _, n := range []int{0, 10, 1000, 5, MaxBodySize, 3} {
		f, err := r.ReadFrame()
		if err != nil || len(f.Body) != n || (n > 0 && f.Body[n-1] != byte(n)) {
			t.Fatalf("frame of %d: got %d bytes, %v", n, len(f.Body), err)
		}
	}
	if cap(r.buf) != MaxBodySize {
		t.Fatalf("reader kept a buffer of cap %d, want %d", cap(r.buf), MaxBodySize)
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("after last frame: %v, want io.EOF", err)
	}
}

func TestFrameTypeClasses(t *testing.T) {
	for b := 0; b < 256; b++ {
		ft := FrameType(b)
		control := b >= 0x10 && b <= 0x13
		r2r := b >= 0x21 && b <= 0x23
		if ft.IsControl() != control || ft.IsRelayToRelay() != r2r {
			t.Fatalf("%#v: IsControl %v IsRelayToRelay %v", ft, ft.IsControl(), ft.IsRelayToRelay())
		}
		if !ft.Known() && ft.String() != "unknown" {
			t.Fatalf("%#v: unknown type named %q", ft, ft.String())
		}
	}
}
