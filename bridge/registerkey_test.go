package bridge

import (
	"testing"
	"testing/synctest"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// boundKey is the key the proxy vouched for (X-WireKube-Public-Key), all
// bytes 0x07; oneByteOff is the same key with byte i flipped to 0x08. Both
// are written out here, not derived from the code under test.
func boundKey() relayproto.Key {
	var k relayproto.Key
	for i := range k {
		k[i] = 0x07
	}
	return k
}

func oneByteOff(i int) relayproto.Key {
	k := boundKey()
	k[i] = 0x08
	return k
}

// oneByteOffCases are the positions of the differing byte: both ends and
// both sides of the middle.
var oneByteOffCases = []struct {
	name string
	at   int
}{{"byte 0", 0}, {"byte 15", 15}, {"byte 16", 16}, {"byte 31", 31}}

// TestRegisterKeyOneByteOffFilter: the frame filter refuses a Register whose
// key differs from the vouched key in one byte, wherever it is, and
// forwards nothing.
func TestRegisterKeyOneByteOffFilter(t *testing.T) {
	if fwd, err := feed(boundKey(), [][]byte{relayproto.AppendRegister(nil, boundKey())}); err != nil || len(fwd) != relayproto.HeaderSize+relayproto.KeySize {
		t.Fatalf("the vouched key itself: forwarded %d bytes, %v", len(fwd), err)
	}
	for _, tc := range oneByteOffCases {
		fwd, err := feed(boundKey(), [][]byte{relayproto.AppendRegister(nil, oneByteOff(tc.at))})
		if reasonOf(err) != contract.CloseRegisterKeyMismatch || len(fwd) != 0 {
			t.Errorf("%s: forwarded %d bytes, %v; want 0 and %s", tc.name, len(fwd), err, contract.CloseRegisterKeyMismatch)
		}
	}
}

// TestRegisterKeyOneByteOffSession: through a whole session, a Register one
// byte off the vouched key closes with 1008 register_key_mismatch and not a
// byte reaches the relay.
func TestRegisterKeyOneByteOffSession(t *testing.T) {
	for _, tc := range oneByteOffCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := startBubble(t, nil)
				ws := b.dial(t, boundKey())
				relayEnd := b.relay.next(t)
				got := make(chan []byte, 1)
				go func() { got <- readAll(t, relayEnd) }()
				send(t, ws, relayproto.AppendRegister(nil, oneByteOff(tc.at)))
				expectClose(t, ws, websocket.ClosePolicyViolation, contract.CloseRegisterKeyMismatch)
				if sent := <-got; len(sent) != 0 {
					t.Errorf("the relay got %d bytes of a refused Register", len(sent))
				}
			})
		})
	}
}
