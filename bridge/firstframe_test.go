package bridge

import (
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// TestFirstFrameOnlyRegister: a first frame of any type but Register (0x01)
// closes with register_missing and forwards nothing, even when its body is
// exactly the vouched key, the shape of a valid Register. A ForwarderRegister
// (0x10) or IngressProbe (0x13) reaching the relay first would open a
// control session (docs/spec.md#raw-relay); every type byte is tried, not only
// the known ones.
func TestFirstFrameOnlyRegister(t *testing.T) {
	for tb := range 256 {
		typ := relayproto.FrameType(tb)
		if typ == relayproto.TypeRegister {
			continue
		}
		frame := relayproto.AppendFrame(nil, typ, streamKey[:])
		fwd, err := feed(streamKey, [][]byte{frame})
		if reasonOf(err) != contract.CloseRegisterMissing || len(fwd) != 0 {
			t.Errorf("first frame %#v with the vouched key as body: forwarded %d bytes, %v; want 0 and %s",
				typ, len(fwd), err, contract.CloseRegisterMissing)
		}
	}
}
