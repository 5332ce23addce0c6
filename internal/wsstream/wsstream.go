// Package wsstream reads the binary messages of a WebSocket connection as one
// byte stream, as the WireKube agent does: a relay frame may span messages
// and a message may hold several frames. Clients of the gateway (the test
// agent, the probe, the benchmark peers) share it.
package wsstream

import (
	"errors"
	"io"

	"github.com/gorilla/websocket"
)

// ErrTextMessage is returned when the peer sends a text message: relay
// frames are always carried in binary messages.
var ErrTextMessage = errors.New("the gateway sent a text message; relay frames are binary")

// Reader is an io.Reader over successive binary messages. Like the
// websocket.Conn it reads from, it is not safe for concurrent use.
type Reader struct {
	conn *websocket.Conn
	cur  io.Reader
}

// NewReader returns a Reader of conn's incoming messages.
func NewReader(conn *websocket.Conn) *Reader { return &Reader{conn: conn} }

// Read reads from the current message and moves to the next one at its end.
// It never returns (0, nil): an empty message is skipped.
func (r *Reader) Read(p []byte) (int, error) {
	for {
		if r.cur == nil {
			typ, msg, err := r.conn.NextReader()
			if err != nil {
				return 0, err
			}
			if typ != websocket.BinaryMessage {
				return 0, ErrTextMessage
			}
			r.cur = msg
		}
		n, err := r.cur.Read(p)
		if errors.Is(err, io.EOF) {
			r.cur = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}
