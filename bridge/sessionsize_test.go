package bridge

import (
	"math/bits"
	"reflect"
	"testing"
)

// maxSessionBytes bounds the session struct, the one allocation every idle
// session keeps whatever it carried (docs/performance.md: heap per live
// session). Measured on linux/amd64, Go 1.26: 1,120 bytes, which the
// runtime serves from its 1,152-byte size class; a field that crosses the
// class costs the next one (1,280) per session.
const maxSessionBytes = 1152

// TestSessionStructStaysInItsSizeClass guards the size of the per-session
// struct on 64-bit platforms.
func TestSessionStructStaysInItsSizeClass(t *testing.T) {
	if bits.UintSize != 64 {
		t.Skip("the bound is measured on 64-bit platforms")
	}
	if n := reflect.TypeFor[session]().Size(); n > maxSessionBytes {
		t.Errorf("session is %d bytes, want <= %d (its allocation's size class)", n, maxSessionBytes)
	}
}
