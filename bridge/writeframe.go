package bridge

import (
	"errors"
	"github.com/wirekube/relay-ws/bridge/internal/wsframe"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// The relay -> client direction writes its binary messages itself, as one
// unfragmented server frame: the header and the payload go out in one
// writev straight from the relay buffer, with no copy into gorilla's write
// buffer (which copies up to its size per message). Control frames (ping,
// pong, close) still go through gorilla. Each is a single Write call and
// each data frame a single write through the socket's RawConn (one writev,
// more only while the socket is full), and the socket's write lock
// serialises whole calls, so frames never interleave. Only the order of
// the close frame against data matters: closeSent, under the write lock,
// keeps data from following a close.

// errCloseSent refuses a data write after the close frame.
var errCloseSent = errors.New("bridge: close frame already sent")

// directConn is the client connection when it is a plain socket that
// the relay reader's pumpIO writes with one writev under its write lock
// (to, the client reader's pumpIO, has its RawConn); nil otherwise (then
// messages go through gorilla).
func directConn(c net.Conn, to *pumpIO) net.Conn {
	switch c.(type) {
	case *net.TCPConn, *net.UnixConn:
		if to.canWrite() {
			return c
		}
	}
	return nil
}

// writeLock orders the close frame after data. The relay reader takes it
// for each data write; a close takes it too, but gives up at its deadline
// (as gorilla's own write lock does), so a close waits for a stuck data
// write at most that long. Contention is rare (only while a session ends),
// so the close side polls instead of holding a timer or a channel per
// session.
type writeLock struct{ mu sync.Mutex }

func (l *writeLock) lock(deadline time.Time) bool {
	for !l.mu.TryLock() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func (l *writeLock) unlock() { l.mu.Unlock() }

// writeMessage sends p as one binary message with the write deadline.
func (s *session) writeMessage(p []byte, deadline time.Time) error {
	if s.direct == nil {
		if err := s.ws.SetWriteDeadline(deadline); err != nil {
			return err
		}
		return s.ws.WriteMessage(websocket.BinaryMessage, p)
	}
	s.wlock.mu.Lock()
	defer s.wlock.unlock()
	if s.closeSent {
		return errCloseSent
	}
	if err := s.direct.SetWriteDeadline(deadline); err != nil {
		return err
	}
	hlen := len(wsframe.AppendServerHeader(s.whdr[:0], len(p)))
	_, err := s.fromRelay.write(&s.fromClient, hlen, p)
	return err
}

var errWriteLockTimeout = errors.New("bridge: write timed out waiting for the connection")

// writeClose sends a close frame; no data frame follows it.
func (s *session) writeClose(msg []byte, deadline time.Time) error {
	if !s.wlock.lock(deadline) {
		return errWriteLockTimeout
	}
	defer s.wlock.unlock()
	s.closeSent = true
	return s.ws.WriteControl(websocket.CloseMessage, msg, deadline)
}
