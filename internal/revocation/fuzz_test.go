package revocation

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/wirekube/relay-ws/internal/revocation/revocationpb"
)

// FuzzFromBridge: any bytes a peer sends as a BridgeMessage either fail
// to validate or yield ops that render back to the same ops.
func FuzzFromBridge(f *testing.F) {
	seed, _ := proto.Marshal(toBridge(sampleOps()[:3]))
	f.Add(seed)
	f.Add([]byte{0x0a, 0x00})
	f.Add([]byte{0x0a, 0x04, 0x0a, 0x02, 0x08, 0x01})
	f.Fuzz(func(t *testing.T, p []byte) {
		var m revocationpb.BridgeMessage
		if proto.Unmarshal(p, &m) != nil {
			return
		}
		ops, err := fromBridge(&m)
		if err != nil {
			return
		}
		back, err := fromBridge(toBridge(ops))
		if err != nil || !reflect.DeepEqual(back, ops) {
			t.Fatalf("re-rendered %+v (%v), validated %+v", back, err, ops)
		}
	})
}

// FuzzFromExtauthz: the same for the bridge's side of the stream.
func FuzzFromExtauthz(f *testing.F) {
	seed, _ := proto.Marshal(toExtauthz(sampleOps()[3:]))
	f.Add(seed)
	f.Add([]byte{0x0a, 0x00})
	f.Fuzz(func(t *testing.T, p []byte) {
		var m revocationpb.ExtauthzMessage
		if proto.Unmarshal(p, &m) != nil {
			return
		}
		ops, err := fromExtauthz(&m)
		if err != nil {
			return
		}
		back, err := fromExtauthz(toExtauthz(ops))
		if err != nil || !reflect.DeepEqual(back, ops) {
			t.Fatalf("re-rendered %+v (%v), validated %+v", back, err, ops)
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
