package revocation

import (
	"reflect"
	"testing"
)

// FuzzDecode: the Watch stream's decoder never panics, and whatever it
// accepts encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(Encode(nil, sampleOps()))
	f.Add(Encode(nil, nil))
	f.Add([]byte{1, 0, 1, byte(KindAdd), 0, 0, 0, 0, 0, 0, 0, 1, 0, 9, 'a'})
	f.Add([]byte{1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, p []byte) {
		ops, err := Decode(p)
		if err != nil {
			return
		}
		if back := Encode(nil, ops); !reflect.DeepEqual(back, p) {
			t.Fatalf("re-encoded %x, decoded from %x", back, p)
		}
	})
}

// FuzzParseBinding: the binding header parser never panics, and whatever
// it accepts formats back to the same value.
func FuzzParseBinding(f *testing.F) {
	f.Add(sampleBinding().Format())
	f.Add("v1;sa=a;sauid=b;pod=;poduid=;node=;nodeuid=;peer=c;key=" + "00000000000000000000000000000000000000000000000000000000000000ff")
	f.Add("v1;;;;")
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBinding(s)
		if err != nil {
			return
		}
		if back := b.Format(); back != s {
			t.Fatalf("formatted %q, parsed from %q", back, s)
		}
	})
}
