package refrelay_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/relayproto"
)

const ioTimeout = 5 * time.Second

func key(b byte) relayproto.Key {
	var k relayproto.Key
	for i := range k {
		k[i] = b
	}
	return k
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func write(t *testing.T, conn net.Conn, b []byte) {
	t.Helper()
	_ = conn.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := conn.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func readFrame(t *testing.T, conn net.Conn) relayproto.Frame {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(ioTimeout))
	f, err := relayproto.ReadFrame(conn, nil)
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	return f
}

// expectData reads one frame and checks it is type t from key src with payload.
func expectData(t *testing.T, conn net.Conn, typ relayproto.FrameType, src relayproto.Key, payload []byte) {
	t.Helper()
	f := readFrame(t, conn)
	if f.Type != typ {
		t.Fatalf("frame type = %#v, want %#v", f.Type, typ)
	}
	k, p, err := relayproto.ParseData(f.Body)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if k != src {
		t.Fatalf("key = %s, want source %s", k, src)
	}
	if !bytes.Equal(p, payload) {
		t.Fatalf("payload = %q, want %q", p, payload)
	}
}

// expectClosed reads until the relay closes conn, failing if a frame that
// is not allowed arrives first.
func expectClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(ioTimeout))
	n, err := io.Copy(io.Discard, conn)
	if isTimeout(err) {
		t.Fatalf("connection still open after %s", ioTimeout)
	}
	if n != 0 {
		t.Fatalf("got %d unexpected bytes before close", n)
	}
}

func frame(t relayproto.FrameType, body []byte) []byte { return relayproto.AppendFrame(nil, t, body) }

func rawHeader(n uint32, t relayproto.FrameType) []byte {
	return []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n), byte(t)}
}

func keyBytes(b byte) []byte { k := key(b); return k[:] }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
