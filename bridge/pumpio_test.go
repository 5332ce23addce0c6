package bridge

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tcpPair is a connected loopback TCP pair: a is the accepted side.
func tcpPair(t *testing.T) (a, b *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	must(t, err)
	s, err := ln.Accept()
	must(t, err)
	t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
	return s.(*net.TCPConn), c.(*net.TCPConn)
}

// pumpSession is a session with just what pumpIO uses: the buffer pool
// and the header scratch, its two pumpIOs on c (read) and d (written).
func pumpSession(c, d net.Conn) *session {
	s := &session{srv: &Server{bufs: newBufPool()}}
	s.fromClient.init(s, c)
	s.fromRelay.init(s, d)
	return s
}

// A message far larger than the socket's buffers goes out whole, header
// first, while the peer drains it slowly: the write waits for room and
// goes on where it stopped.
func TestPumpWriteDeliversHeaderAndPayloadWholeThroughAFullSocket(t *testing.T) {
	src, dst := tcpPair(t)
	peer, _ := tcpPair(t)
	must(t, dst.SetWriteBuffer(4096))
	s := pumpSession(peer, dst)
	hdr := []byte{0x82, 0x7f, 0, 0, 0, 0, 0, 0x40, 0, 0}
	copy(s.whdr[:], hdr)
	payload := bytes.Repeat([]byte("relay frame bytes "), 1<<20/18)
	must(t, dst.SetWriteDeadline(time.Now().Add(time.Minute)))

	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(hdr)+len(payload))
		_ = src.SetReadDeadline(time.Now().Add(time.Minute))
		chunk := 1500
		off := 0
		for off < len(b) { // small reads: the writer meets a full socket many times
			n, err := src.Read(b[off:min(off+chunk, len(b))])
			off += n
			if err != nil {
				break
			}
		}
		got <- b[:off]
	}()
	n, err := s.fromClient.write(&s.fromRelay, len(hdr), payload)
	if err != nil || n != len(payload) {
		t.Fatalf("write: %d, %v; want %d, nil", n, err, len(payload))
	}
	want := append(append([]byte{}, hdr...), payload...)
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("the peer received %d bytes, not the header and payload in order (%d bytes)", len(b), len(want))
	}
	if s.fromClient.wp != nil {
		t.Error("the writer keeps a reference to the payload after the write")
	}
}

// A peer that reads nothing: the write stops at the deadline with a
// timeout, having sent the start of the message and counted only that.
func TestPumpWriteStopsAtTheWriteDeadline(t *testing.T) {
	src, dst := tcpPair(t)
	peer, _ := tcpPair(t)
	s := pumpSession(peer, dst)
	hdr := []byte{0x82, 0x7e, 0x01, 0x00}
	copy(s.whdr[:], hdr)
	payload := bytes.Repeat([]byte{0xa5, 0x5a, 0x01}, 16<<20/3) // more than both sockets' buffers
	must(t, dst.SetWriteDeadline(time.Now().Add(200*time.Millisecond)))
	n, err := s.fromClient.write(&s.fromRelay, len(hdr), payload)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a peer that reads nothing: %v; want a timeout (os.ErrDeadlineExceeded)", err)
	}
	if n <= 0 || n >= len(payload) {
		t.Fatalf("write counted %d of %d payload bytes; want a part", n, len(payload))
	}
	must(t, dst.Close())
	must(t, src.SetReadDeadline(time.Now().Add(time.Minute)))
	b, err := io.ReadAll(src)
	must(t, err)
	want := append(append([]byte{}, hdr...), payload[:n]...)
	if !bytes.Equal(b, want) {
		t.Fatalf("the peer received %d bytes; want the header and the %d counted payload bytes", len(b), n)
	}
}

// A peer that went away: the write fails as net.Conn.Write would say it.
func TestPumpWriteReportsAGonePeerAsAWriteOpError(t *testing.T) {
	src, dst := tcpPair(t)
	peer, _ := tcpPair(t)
	s := pumpSession(peer, dst)
	must(t, src.SetLinger(0))
	must(t, src.Close()) // reset
	must(t, dst.SetWriteDeadline(time.Now().Add(time.Minute)))
	var err error
	for i := 0; i < 100 && err == nil; i++ { // the reset arrives after a write or two
		_, err = s.fromClient.write(&s.fromRelay, 0, make([]byte, 1024))
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "write" || !(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
		t.Fatalf("write to a reset peer: %v; want a write *net.OpError with ECONNRESET or EPIPE", err)
	}
}

// readInto appends to a frame in progress, and gives the pooled buffer
// back when the stream ends on an empty one.
func TestPumpReadIntoAppendsToAFrameInProgress(t *testing.T) {
	conn, peer := tcpPair(t)
	s := pumpSession(conn, peer)
	var sb streamBuf
	sb.n = copy(s.take(&sb), "abc")
	_, err := peer.Write([]byte("def"))
	must(t, err)
	must(t, conn.SetReadDeadline(time.Now().Add(time.Minute)))
	for sb.n < 6 {
		must(t, s.fromClient.readInto(&sb))
	}
	if got := string((*sb.b)[:sb.n]); got != "abcdef" {
		t.Fatalf("buffer holds %q, want \"abcdef\"", got)
	}
	sb.n = 0
	must(t, peer.CloseWrite())
	if err := s.fromClient.readInto(&sb); err != io.EOF {
		t.Fatalf("readInto at the end of the stream: %v, want io.EOF", err)
	}
	if sb.b != nil {
		t.Error("readInto kept a pooled buffer after the end of the stream")
	}
}

// While a message waits for room in the middle of its bytes, the other
// writers of the connection (gorilla's control frames: one Write each)
// wait for the whole message: the client reads the message whole, then
// the control frames.
func TestPumpWriteKeepsOtherWritersOutOfAMessage(t *testing.T) {
	src, dst := tcpPair(t)
	peer, _ := tcpPair(t)
	must(t, dst.SetWriteBuffer(4096))
	s := pumpSession(dst, peer)
	payload := bytes.Repeat([]byte{0x5a, 0xa5, 0x33}, 2<<20/3) // more than both sockets' buffers hold
	// A server binary frame of len(payload) bytes: 0x82, 127, 64-bit length.
	hdr := []byte{0x82, 127, 0, 0, 0, 0, 0, byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload))}
	copy(s.whdr[:], hdr)
	ping := []byte{0x89, 0x04, 'p', 'i', 'n', 'g'}
	const pings = 8
	must(t, dst.SetWriteDeadline(time.Now().Add(time.Minute)))
	must(t, src.SetReadDeadline(time.Now().Add(time.Minute)))

	started, resume := make(chan struct{}), make(chan struct{})
	got := make(chan error, 1)
	go func() { // the client: the message whole, then the pings
		in := bufio.NewReaderSize(src, 64<<10)
		h := make([]byte, len(hdr))
		_, err := io.ReadFull(in, h[:2])
		close(started)
		<-resume
		if err == nil {
			_, err = io.ReadFull(in, h[2:])
		}
		if err != nil || !bytes.Equal(h, hdr) {
			got <- fmt.Errorf("the first frame's header is % x (%v), want the message's % x", h, err, hdr)
			return
		}
		b := make([]byte, len(payload))
		if _, err := io.ReadFull(in, b); err != nil || !bytes.Equal(b, payload) {
			got <- fmt.Errorf("the message's payload did not arrive whole (%v): another frame inside it?", err)
			return
		}
		rest, err := io.ReadAll(in)
		if want := bytes.Repeat(ping, pings); err != nil || !bytes.Equal(rest, want) {
			got <- fmt.Errorf("after the message the client read % x (%v), want %d ping frames", rest, err, pings)
			return
		}
		got <- nil
	}()

	done := make(chan error, 1)
	go func() {
		_, err := s.fromRelay.write(&s.fromClient, len(hdr), payload)
		done <- err
	}()
	<-started // the message is on its way and the client reads no more: the socket is full
	var wg sync.WaitGroup
	for range pings {
		wg.Go(func() {
			_, err := dst.Write(ping) // as gorilla's WriteControl: one Write
			if err != nil {
				t.Error(err)
			}
		})
	}
	time.Sleep(20 * time.Millisecond) // lets the pings reach the write lock; the assertions do not depend on it
	close(resume)
	must(t, <-done)
	wg.Wait()
	must(t, dst.CloseWrite())
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}
