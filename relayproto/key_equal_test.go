package relayproto

import "testing"

// TestKeyEqualEveryByte: a key that differs from another in a single byte,
// wherever that byte is, is a different key. The keys are written out, not
// derived from the code under test: all bytes 0x07 (a fixture peer's key)
// and the same key with one byte flipped to 0x08.
func TestKeyEqualEveryByte(t *testing.T) {
	var bound Key
	for i := range bound {
		bound[i] = 0x07
	}
	if !bound.Equal(bound) {
		t.Fatal("a key is not Equal to itself")
	}
	for _, i := range []int{0, 1, 15, 16, 30, 31} {
		other := bound
		other[i] = 0x08
		if bound.Equal(other) || other.Equal(bound) {
			t.Errorf("keys differing only in byte %d compare Equal", i)
		}
	}
	var zero Key
	if bound.Equal(zero) || zero.Equal(bound) {
		t.Error("a key compares Equal to the zero key")
	}
}
