package wsframe

import (
	"bytes"
	"fmt"
	"testing"
)

// unmaskReference is the bytewise definition of RFC 6455 section 5.3.
func unmaskReference(dst, src []byte, mask [4]byte, pos int) int {
	for i := range src {
		dst[i] = src[i] ^ mask[(pos+i)&3]
	}
	return (pos + len(src)) & 3
}

// FuzzUnmask: the word-at-a-time unmasking equals the bytewise reference for
// every length and mask phase, into another buffer, in place, and moved
// left within one buffer (as the decoder closes header gaps), and when a
// payload is unmasked in pieces.
func FuzzUnmask(f *testing.F) {
	f.Add([]byte("hello, world: a payload longer than thirty-two bytes"), uint32(0x12345678), uint8(1), uint8(3), uint8(0))
	f.Add(bytes.Repeat([]byte{0xAA}, 1400), uint32(0xdeadbeef), uint8(3), uint8(7), uint8(13))
	f.Add([]byte{1, 2, 3}, uint32(1), uint8(2), uint8(0), uint8(1))
	f.Fuzz(func(t *testing.T, src []byte, mask uint32, phase, gap, cut uint8) {
		m := [4]byte{byte(mask >> 24), byte(mask >> 16), byte(mask >> 8), byte(mask)}
		want := make([]byte, len(src))
		wantPos := unmaskReference(want, src, m, int(phase))
		check := func(name string, got []byte, pos int) {
			t.Helper()
			if !bytes.Equal(got, want) || pos != wantPos {
				t.Fatalf("%s: got %x (phase %d), want %x (phase %d)", name, got, pos, want, wantPos)
			}
		}
		d := Decoder{mask: m, maskPos: int(phase)}
		out := make([]byte, len(src))
		d.unmask(out, src)
		check("other buffer", out, d.maskPos)

		buf := append(make([]byte, int(gap)), src...)
		d = Decoder{mask: m, maskPos: int(phase)}
		d.unmask(buf[:len(src)], buf[gap:])
		check(fmt.Sprintf("moved left by %d", gap), buf[:len(src)], d.maskPos)

		in := append([]byte(nil), src...)
		d = Decoder{mask: m, maskPos: int(phase)}
		k := min(int(cut), len(in))
		d.unmask(in[:k], in[:k])
		d.unmask(in[k:], in[k:])
		check(fmt.Sprintf("in place, cut at %d", k), in, d.maskPos)
	})
}

func TestUnmaskMatchesReference(t *testing.T) {
	src := make([]byte, 200)
	for i := range src {
		src[i] = byte(i * 7)
	}
	m := [4]byte{0x12, 0x34, 0x56, 0x78}
	for n := range len(src) {
		for phase := range 4 {
			want := make([]byte, n)
			wantPos := unmaskReference(want, src[:n], m, phase)
			got := make([]byte, n)
			d := Decoder{mask: m, maskPos: phase}
			d.unmask(got, src[:n])
			if !bytes.Equal(got, want) || d.maskPos != wantPos {
				t.Fatalf("length %d phase %d: differs from the reference", n, phase)
			}
		}
	}
}

func BenchmarkUnmask(b *testing.B) {
	for _, n := range []int{1400, 16 << 10} {
		src := make([]byte, n)
		b.Run(fmt.Sprintf("in_place_%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			d := Decoder{mask: [4]byte{1, 2, 3, 4}}
			for b.Loop() {
				d.unmask(src, src)
			}
		})
		b.Run(fmt.Sprintf("bytewise_%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				unmaskReference(src, src, [4]byte{1, 2, 3, 4}, 0)
			}
		})
	}
}
