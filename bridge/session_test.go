package bridge

import (
	"bytes"
	"encoding/binary"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wirekube/relay-ws/bridge/internal/wsframe"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

// TestRegisterRules: anything but a Register of the vouched key as the first
// frame closes with 1008 (or 1009) and nothing reaches the relay.
func TestRegisterRules(t *testing.T) {
	k := testKey(1)
	tests := []struct {
		name   string
		msgs   [][]byte // nil: send nothing and wait for the deadline
		code   int
		reason contract.Reason
	}{
		{"key mismatch", [][]byte{relayproto.AppendRegister(nil, testKey(2))},
			websocket.ClosePolicyViolation, contract.CloseRegisterKeyMismatch},
		{"data first", [][]byte{dataFrame(k, 1, 10)}, websocket.ClosePolicyViolation, contract.CloseRegisterMissing},
		{"keepalive first", [][]byte{relayproto.AppendFrame(nil, relayproto.TypeKeepalive)},
			websocket.ClosePolicyViolation, contract.CloseRegisterMissing},
		{"control first", [][]byte{relayproto.AppendFrame(nil, relayproto.TypeIngressProbe, []byte{0, 0})},
			websocket.ClosePolicyViolation, contract.CloseRegisterMissing},
		{"register 31 bytes", [][]byte{relayproto.AppendFrame(nil, relayproto.TypeRegister, k[:31])},
			websocket.ClosePolicyViolation, contract.CloseRegisterMalformed},
		{"register 33 bytes", [][]byte{relayproto.AppendFrame(nil, relayproto.TypeRegister, k[:], []byte{0})},
			websocket.ClosePolicyViolation, contract.CloseRegisterMalformed},
		{"length zero", [][]byte{rawHeader(0, 0)}, websocket.ClosePolicyViolation, contract.CloseFrameMalformed},
		{"length zero, 4 bytes only", [][]byte{rawHeader(0, 0)[:4]}, websocket.ClosePolicyViolation, contract.CloseFrameMalformed},
		{"length over max", [][]byte{rawHeader(relayproto.MaxFrameSize+1, relayproto.TypeRegister)},
			websocket.CloseMessageTooBig, contract.CloseFrameTooLarge},
		{"mismatch split", split(relayproto.AppendRegister(nil, testKey(3)), 1),
			websocket.ClosePolicyViolation, contract.CloseRegisterKeyMismatch},
		{"text message", [][]byte{[]byte("hello")}, websocket.CloseUnsupportedData, contract.CloseTextMessage},
		{"nothing", nil, websocket.ClosePolicyViolation, contract.CloseRegisterTimeout},
		{"half a register", [][]byte{relayproto.AppendRegister(nil, k)[:20]},
			websocket.ClosePolicyViolation, contract.CloseRegisterTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr := newPipeRelay()
			h := startBridge(t, func(o *Options) {
				o.DialRelay = pr.dial
				// Only a case that never completes a Register waits for the
				// deadline (nothing else can close it, so how long it is does
				// not matter); every other case must be decided by what was
				// sent, never by a deadline that a slow test machine reached
				// first. TestRegisterDeadlineIsExact checks the instant.
				o.RegisterTimeout = time.Hour
				if tt.reason == contract.CloseRegisterTimeout {
					o.RegisterTimeout = 200 * time.Millisecond
				}
			})
			ws := h.dial(t, identity(k))
			relayEnd := pr.next(t)
			got := make(chan []byte, 1)
			go func() { got <- readAll(t, relayEnd) }()
			for _, m := range tt.msgs {
				mt := websocket.BinaryMessage
				if tt.reason == contract.CloseTextMessage {
					mt = websocket.TextMessage
				}
				if err := ws.WriteMessage(mt, m); err != nil {
					t.Fatalf("write: %v", err)
				}
			}
			expectClose(t, ws, tt.code, tt.reason)
			if b := <-got; len(b) != 0 {
				t.Fatalf("relay received %d bytes: %x", len(b), b)
			}
			h.stop()
			if n := promtest.ToFloat64(h.srv.metrics.sessions.WithLabelValues(string(tt.reason))); n != 1 {
				t.Errorf("sessions_total{result=%q} = %v, want 1", tt.reason, n)
			}
		})
	}
}

func split(b []byte, size int) [][]byte {
	var out [][]byte
	for len(b) > size {
		out = append(out, b[:size])
		b = b[size:]
	}
	return append(out, b)
}

// echo sends Data addressed to the client's own key and expects it back.
func echo(t *testing.T, ws *websocket.Conn, fs *frameStream, k relayproto.Key, seq uint32) {
	t.Helper()
	send(t, ws, dataFrame(k, seq, 100))
	expectData(t, fs, k, seq, 100)
}

func expectData(t *testing.T, fs *frameStream, src relayproto.Key, seq uint32, size int) {
	t.Helper()
	f := fs.next()
	if f.Type != relayproto.TypeData {
		t.Fatalf("got %#v, want data", f.Type)
	}
	want := dataFrame(src, seq, size)[relayproto.HeaderSize:]
	if !bytes.Equal(f.Body, want) {
		key, payload, _ := relayproto.ParseData(f.Body)
		t.Fatalf("data from %s seq %d, want from %s seq %d", key, binary.BigEndian.Uint32(payload), src, seq)
	}
}

func TestRegisterAccepted(t *testing.T) {
	k := testKey(1)
	reg := relayproto.AppendRegister(nil, k)
	tests := []struct {
		name     string
		msgs     [][]byte
		sendData bool // the messages do not carry Data seq 1 themselves
	}{
		{"one message", [][]byte{reg}, true},
		{"one byte per message", split(reg, 1), true},
		{"with the next frames", [][]byte{append(append(append([]byte{}, reg...),
			relayproto.AppendFrame(nil, relayproto.TypeKeepalive)...), dataFrame(k, 1, 100)...)}, false},
		{"frame spanning messages", [][]byte{append(append([]byte{}, reg...), dataFrame(k, 1, 100)[:50]...),
			dataFrame(k, 1, 100)[50:]}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startBridge(t, nil)
			ws := h.dial(t, identity(k))
			for _, m := range tt.msgs {
				send(t, ws, m)
			}
			fs := &frameStream{t: t, ws: ws}
			if tt.sendData {
				send(t, ws, dataFrame(k, 1, 100))
			}
			expectData(t, fs, k, 1, 100)
			echo(t, ws, fs, k, 2)
		})
	}
}

// TestFrameRulesAfterRegister: forbidden types close with 1008, oversize
// with 1009, text with 1003; unknown types are dropped and counted.
func TestFrameRulesAfterRegister(t *testing.T) {
	k := testKey(1)
	tests := []struct {
		name   string
		frame  []byte
		text   bool
		code   int
		reason contract.Reason
	}{
		{"register again", relayproto.AppendRegister(nil, k), false, websocket.ClosePolicyViolation, contract.CloseRegisterRepeated},
		{"forwarder register", relayproto.AppendFrame(nil, 0x10, make([]byte, 66)), false, websocket.ClosePolicyViolation, contract.CloseFrameForbidden},
		{"forwarder unregister", relayproto.AppendFrame(nil, 0x11, []byte{0, 1}), false, websocket.ClosePolicyViolation, contract.CloseFrameForbidden},
		{"forwarder stats", relayproto.AppendFrame(nil, 0x12, []byte{0, 1}), false, websocket.ClosePolicyViolation, contract.CloseFrameForbidden},
		{"ingress probe", relayproto.AppendFrame(nil, 0x13, []byte{0, 0}), false, websocket.ClosePolicyViolation, contract.CloseFrameForbidden},
		{"cluster envelope", relayproto.AppendFrame(nil, 0x21, []byte{1}), false, websocket.ClosePolicyViolation, contract.CloseFrameForbidden},
		{"cluster external reply", relayproto.AppendFrame(nil, 0x22, nil), false, websocket.ClosePolicyViolation, contract.CloseFrameForbidden},
		{"cluster external fanout", relayproto.AppendFrame(nil, 0x23, nil), false, websocket.ClosePolicyViolation, contract.CloseFrameForbidden},
		{"error", relayproto.AppendFrame(nil, relayproto.TypeError, []byte("x")), false, websocket.ClosePolicyViolation, contract.CloseFrameForbidden},
		{"length zero", rawHeader(0, 0), false, websocket.ClosePolicyViolation, contract.CloseFrameMalformed},
		{"length zero, 4 bytes only", rawHeader(0, 0)[:4], false, websocket.ClosePolicyViolation, contract.CloseFrameMalformed},
		{"length over max (header only)", rawHeader(relayproto.MaxFrameSize+1, relayproto.TypeData), false, websocket.CloseMessageTooBig, contract.CloseFrameTooLarge},
		{"forbidden header without body", rawHeader(100, 0x10), false, websocket.ClosePolicyViolation, contract.CloseFrameForbidden},
		{"text", []byte("hi"), true, websocket.CloseUnsupportedData, contract.CloseTextMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startBridge(t, nil)
			ws := h.register(t, k)
			fs := &frameStream{t: t, ws: ws}
			echo(t, ws, fs, k, 1)
			before := h.relay.Stats()
			mt := websocket.BinaryMessage
			if tt.text {
				mt = websocket.TextMessage
			}
			if err := ws.WriteMessage(mt, tt.frame); err != nil {
				t.Fatal(err)
			}
			expectClose(t, ws, tt.code, tt.reason)
			testutil.Eventually(t, "relay session closed", func() bool { return h.relay.Stats().ActiveSessions == 0 })
			if after := h.relay.Stats(); after.Unknown != before.Unknown || after.ControlRefused != 0 {
				t.Errorf("relay saw the frame: unknown %d -> %d", before.Unknown, after.Unknown)
			}
		})
	}
}

func TestMaxSizeFrameAccepted(t *testing.T) {
	k := testKey(1)
	h := startBridge(t, nil)
	ws := h.register(t, k)
	fs := &frameStream{t: t, ws: ws}
	size := relayproto.MaxBodySize - relayproto.KeySize // N == 65536 exactly
	frame := dataFrame(k, 7, size)
	send(t, ws, frame[:40000]) // split as the agent splits frames over 65,499 bytes
	send(t, ws, frame[40000:])
	expectData(t, fs, k, 7, size)
}

func TestUnknownTypeDroppedAndCounted(t *testing.T) {
	k := testKey(1)
	h := startBridge(t, nil)
	ws := h.register(t, k)
	fs := &frameStream{t: t, ws: ws}
	msg := append(relayproto.AppendFrame(nil, 0x07, []byte("??")), dataFrame(k, 1, 100)...)
	msg = append(msg, relayproto.AppendFrame(nil, 0x99, nil)...)
	send(t, ws, msg)
	expectData(t, fs, k, 1, 100)
	echo(t, ws, fs, k, 2)
	if n := promtest.ToFloat64(h.srv.metrics.dropped.WithLabelValues(dropUnknownType)); n != 2 {
		t.Fatalf("dropped_frames_total{reason=unknown_type} = %v, want 2", n)
	}
	if st := h.relay.Stats(); st.Unknown != 0 {
		t.Fatalf("relay saw %d unknown frames, want 0", st.Unknown)
	}
}

func TestAllowedTypesForwarded(t *testing.T) {
	k := testKey(1)
	h := startBridge(t, nil)
	ws := h.register(t, k)
	fs := &frameStream{t: t, ws: ws}
	var msg []byte
	msg = relayproto.AppendFrame(msg, relayproto.TypeKeepalive)
	msg = relayproto.AppendFrame(msg, relayproto.TypeNATProbe, []byte{10, 0, 0, 1, 0x0d, 0x96})
	msg = relayproto.AppendFrame(msg, relayproto.TypeRelayProbe, []byte("12345678"))
	msg = relayproto.AppendFrame(msg, relayproto.TypeExternalData, []byte("12345678"), []byte{0, 0})
	msg = relayproto.AppendFrame(msg, relayproto.TypeBimodalHint, k[:])
	send(t, ws, msg)
	f := fs.next()
	if f.Type != relayproto.TypeBimodalHint || !bytes.Equal(f.Body, k[:]) {
		t.Fatalf("got %#v %x, want the bimodal hint back", f.Type, f.Body)
	}
	testutil.Eventually(t, "relay ignored 4 frames", func() bool { return h.relay.Stats().Ignored == 4 })
}

// TestTwoSessionsExchange: every payload intact and in order, both ways.
func TestTwoSessionsExchange(t *testing.T) {
	ka, kb := testKey(1), testKey(100)
	h := startBridge(t, nil)
	a, b := h.register(t, ka), h.register(t, kb)
	const n = 200
	errc := make(chan error, 2)
	for _, p := range []struct {
		ws  *websocket.Conn
		dst relayproto.Key
	}{{a, kb}, {b, ka}} {
		go func() {
			for i := range uint32(n) {
				if err := p.ws.WriteMessage(websocket.BinaryMessage, dataFrame(p.dst, i, 1400)); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	fa, fb := &frameStream{t: t, ws: a}, &frameStream{t: t, ws: b}
	for i := range uint32(n) {
		expectData(t, fb, ka, i, 1400)
		expectData(t, fa, kb, i, 1400)
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// TestWebSocketFraming: the bridge reads RFC 6455 frames itself; fragmented
// messages and client pings work, protocol errors close with 1002.
func TestWebSocketFraming(t *testing.T) {
	k := testKey(1)
	h := startBridge(t, nil)
	ws := h.register(t, k)
	fs := &frameStream{t: t, ws: ws}

	// A 10,000-byte Data frame written through a 4 KiB writer leaves the
	// client as three fragments of one message.
	w, err := ws.NextWriter(websocket.BinaryMessage)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(dataFrame(k, 5, 10000)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	expectData(t, fs, k, 5, 10000)

	pong := make(chan string, 1)
	ws.SetPongHandler(func(s string) error { pong <- s; return nil })
	if err := ws.WriteControl(websocket.PingMessage, []byte("are you there"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	echo(t, ws, fs, k, 6) // reading lets the pong handler run
	select {
	case s := <-pong:
		if s != "are you there" {
			t.Fatalf("pong %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no pong")
	}

	// An unmasked client frame breaks RFC 6455.
	if _, err := ws.NetConn().Write(wsFrame(true, wsframe.OpBinary, dataFrame(k, 7, 10), nil)); err != nil {
		t.Fatal(err)
	}
	expectClose(t, ws, websocket.CloseProtocolError, contract.CloseProtocolError)
}

// TestRegisterDeadlineIsExact: without a verified Register the session is
// closed (1008 register_timeout) exactly RegisterTimeout after the upgrade,
// also when half a Register has arrived; nothing reaches the relay. In a
// synctest bubble.
func TestRegisterDeadlineIsExact(t *testing.T) {
	for name, send := range map[string][]byte{"nothing": nil, "half a register": relayproto.AppendRegister(nil, testKey(1))[:20]} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const deadline = 3 * time.Second
				b := startBubble(t, func(o *Options) { o.RegisterTimeout = deadline })
				ws := b.dial(t, testKey(1))
				start := time.Now()
				relayEnd := b.relay.next(t)
				got := make(chan []byte, 1)
				go func() { got <- readAll(t, relayEnd) }()
				if send != nil {
					if err := ws.WriteMessage(websocket.BinaryMessage, send); err != nil {
						t.Fatal(err)
					}
				}
				expectClose(t, ws, websocket.ClosePolicyViolation, contract.CloseRegisterTimeout)
				if d := time.Since(start); d != deadline {
					t.Errorf("closed %s after the upgrade, want %s", d, deadline)
				}
				if sent := <-got; len(sent) != 0 {
					t.Errorf("the relay got %d bytes before a verified Register", len(sent))
				}
			})
		})
	}
}
