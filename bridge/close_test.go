package bridge

import (
	"encoding/binary"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/bridge/internal/wsframe"
	"github.com/wirekube/relay-ws/internal/contract"
)

func closePayload(code uint16, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, code), reason...)
}

// closeCases are the client close frames of the tests and the fuzz seeds:
// the code echoed back, or 0 for a protocol error (close 1002).
var closeCases = []struct {
	name    string
	payload []byte
	echo    int
}{
	{"empty", nil, wsframe.CloseNoStatus},
	{"one byte", []byte{0x03}, 0},
	{"normal", closePayload(1000, ""), 1000},
	{"going away with reason", closePayload(1001, "bye"), 1001},
	{"protocol error", closePayload(1002, ""), 1002},
	{"unsupported data", closePayload(1003, ""), 1003},
	{"1004 reserved", closePayload(1004, ""), 0},
	{"1005 local only", closePayload(1005, ""), 0},
	{"1006 local only", closePayload(1006, ""), 0},
	{"invalid data", closePayload(1007, ""), 1007},
	{"internal error", closePayload(1011, "x"), 1011},
	{"service restart", closePayload(1012, ""), 1012},
	{"1015 TLS local only", closePayload(1015, ""), 0},
	{"1016 reserved", closePayload(1016, ""), 0},
	{"2999 reserved", closePayload(2999, ""), 0},
	{"999", closePayload(999, ""), 0},
	{"zero", closePayload(0, ""), 0},
	{"application 3000", closePayload(3000, "app"), 3000},
	{"private 4999", closePayload(4999, "héllo"), 4999},
	{"5000", closePayload(5000, ""), 0},
	{"65535", closePayload(65535, ""), 0},
	{"reason not UTF-8", closePayload(1000, "\xff\xfe"), 0},
	{"reason cut inside a rune", closePayload(1000, "\xc3"), 0},
	{"reason with NUL is UTF-8", closePayload(1000, "a\x00b"), 1000},
}

func TestParseClientClose(t *testing.T) {
	for _, tt := range closeCases {
		code, err := wsframe.ParseClientClose(tt.payload)
		if tt.echo == 0 {
			if !errors.Is(err, wsframe.ErrProtocol) {
				t.Errorf("%s: code %d, err %v; want a protocol error", tt.name, code, err)
			}
			continue
		}
		if err != nil || code != tt.echo {
			t.Errorf("%s: code %d, err %v; want %d", tt.name, code, err, tt.echo)
		}
	}
}

// FuzzParseClientClose: a payload is accepted exactly when it is empty, or
// a valid code with a UTF-8 reason, and then its code is what is echoed.
func FuzzParseClientClose(f *testing.F) {
	for _, tt := range closeCases {
		f.Add(tt.payload)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		code, err := wsframe.ParseClientClose(p)
		if err != nil && !errors.Is(err, wsframe.ErrProtocol) {
			t.Fatalf("error %v is not a protocol error", err)
		}
		var want bool
		switch {
		case len(p) == 0:
			want = code == wsframe.CloseNoStatus
		case len(p) >= 2:
			c := int(binary.BigEndian.Uint16(p))
			valid := (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014) || (c >= 3000 && c <= 4999)
			want = valid && utf8.Valid(p[2:]) && code == c
		}
		if (err == nil) != want {
			t.Fatalf("payload %x: code %d, err %v", p, code, err)
		}
	})
}

// TestClientCloseAnswered: a valid client close is echoed with its code; an
// invalid one (RFC 6455 section 7.4) is answered 1002 websocket_protocol_error,
// before and after Register.
func TestClientCloseAnswered(t *testing.T) {
	k := testKey(1)
	h := startBridge(t, nil)
	for _, registered := range []bool{false, true} {
		for _, tt := range closeCases {
			var ws *websocket.Conn
			if registered {
				ws = h.register(t, k)
			} else {
				ws = h.dial(t, identity(k))
			}
			if _, err := ws.NetConn().Write(wsFrame(true, wsframe.OpClose, tt.payload, testMask)); err != nil {
				t.Fatal(err)
			}
			code, reason := tt.echo, contract.Reason("")
			if code == 0 {
				code, reason = websocket.CloseProtocolError, contract.CloseProtocolError
			}
			t.Run(tt.name, func(t *testing.T) { expectClose(t, ws, code, reason) })
			ws.Close()
		}
	}
}
