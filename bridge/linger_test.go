package bridge

import (
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

// TestCloseSurvivesUnreadClientBytes: a client that keeps sending after the
// frame the bridge refuses, and reads only later, must still get the close
// frame, not a reset. Closing a socket with unread received bytes makes
// Linux send RST, and a proxy in between then drops the close frame it has
// not forwarded yet; the bridge half-closes and drains instead.
func TestCloseSurvivesUnreadClientBytes(t *testing.T) {
	k := testKey(1)
	tests := []struct {
		name   string
		first  []byte // the refused frame's stream bytes
		text   bool   // sent as a text message
		code   int
		reason contract.Reason
	}{
		{"frame of 65537 bytes", oversizedFrame(), false, websocket.CloseMessageTooBig, contract.CloseFrameTooLarge},
		{"forbidden frame", relayproto.AppendFrame(nil, 0x21, make([]byte, 40000)), false,
			websocket.ClosePolicyViolation, contract.CloseFrameForbidden},
		{"text message", make([]byte, 40000), true, websocket.CloseUnsupportedData, contract.CloseTextMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Only the client ends the linger here (by reading the close
			// and answering it), not a close grace a slow machine reaches
			// while the test is still writing.
			h := startBridge(t, func(o *Options) { o.WriteTimeout = time.Minute })
			h.srv.closeGrace = time.Minute
			ws := h.register(t, k)
			// Split as the agent splits frames over 65,499 bytes. The first
			// message holds the header the bridge refuses; the rest arrive
			// after the refusal, as from an agent that has not yet read the
			// close.
			parts := split(tt.first, 65499)
			for range 10 {
				parts = append(parts, make([]byte, 16<<10))
			}
			for i, p := range parts {
				mt := websocket.BinaryMessage
				if i == 0 && tt.text {
					mt = websocket.TextMessage
				}
				if err := ws.WriteMessage(mt, p); err != nil {
					// A write fails only once the bridge has closed the
					// socket with bytes unread, i.e. reset the connection.
					t.Fatalf("write after the refused frame: %v", err)
				}
				if i == 0 {
					waitSessionEnded(t, h.srv)
				}
			}
			_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _, err := ws.ReadMessage()
			var ce *websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("want close %d %s, got %v", tt.code, tt.reason, err)
			}
			if ce.Code != tt.code || ce.Text != string(tt.reason) {
				t.Fatalf("close = %d %q, want %d %q", ce.Code, ce.Text, tt.code, tt.reason)
			}
			// After the close frame the connection must end with FIN (EOF
			// here), never with a reset.
			var b [64]byte
			n, err := ws.NetConn().Read(b[:])
			if n != 0 || !errors.Is(err, io.EOF) {
				t.Fatalf("after the close frame: %d bytes, %v; want EOF", n, err)
			}
		})
	}
}

// waitSessionEnded waits until the only session of srv has ended: its close
// is decided and the close frame written (it may still linger, or be gone).
func waitSessionEnded(t *testing.T, srv *Server) {
	t.Helper()
	testutil.Eventually(t, "the bridge to refuse the frame", func() bool {
		srv.mu.Lock()
		sessions := slices.Collect(maps.Keys(srv.sessions))
		srv.mu.Unlock()
		return len(sessions) == 0 || len(sessions) == 1 && sessions[0].ended()
	})
}

// oversizedFrame is a Data frame header declaring 65,537 bytes and its body.
func oversizedFrame() []byte {
	b := binary.BigEndian.AppendUint32(nil, relayproto.MaxFrameSize+1)
	b = append(b, byte(relayproto.TypeData))
	return append(b, make([]byte, relayproto.MaxFrameSize)...)
}

// TestLingerIsBounded: a client that never stops sending after the close
// frame holds its session only until lingerLimit bytes were dropped: the
// bridge reads at least lingerLimit bytes and at most one more read's worth,
// not the four times lingerLimit the client offers before the close grace.
func TestLingerIsBounded(t *testing.T) {
	k := testKey(1)
	// Only the byte limit may end the linger: the close grace and the write
	// timeout are far longer than sending 4*lingerLimit takes even on a
	// loaded machine (with the harness's 2 s, a slow client ended it by time).
	h := startBridgeCountingReads(t, func(o *Options) { o.WriteTimeout = time.Minute })
	h.srv.closeGrace = time.Minute
	ws := h.register(t, k)
	send(t, ws, rawHeader(relayproto.MaxFrameSize+1, relayproto.TypeData))
	before := h.clientRead.Load() // the upgrade, Register and the header
	chunk := make([]byte, 32<<10)
	_ = ws.SetWriteDeadline(time.Now().Add(2 * time.Minute))
	for sent := 0; sent < 4*lingerLimit; sent += len(chunk) {
		if err := ws.WriteMessage(websocket.BinaryMessage, chunk); err != nil {
			break // the bridge closed after lingerLimit bytes
		}
	}
	testutil.Eventually(t, "session ended", func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		return len(h.srv.sessions) == 0
	})
	// One read past the limit: the stream buffer, the WebSocket reader's
	// buffer and a message of the client, with its frame header.
	read := h.clientRead.Load() - before
	if most := int64(lingerLimit + streamBufSize + readBufferSize + len(chunk) + 14); read < lingerLimit || read > most {
		t.Errorf("bridge read %d bytes after the close frame, want %d to %d", read, lingerLimit, most)
	}
}
