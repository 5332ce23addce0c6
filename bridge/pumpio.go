package bridge

import (
	"io"
	"net"
	"os"
	"syscall"

	"github.com/wirekube/relay-ws/bridge/internal/sockio"
)

// pumpIO is the system calls of one of a session's two pump goroutines:
// it reads its own connection (readInto) and writes what it forwards to
// the other one (write). The client reader's pumpIO reads the client and
// writes the relay, the relay reader's the other way round; one goroutine
// at a time uses a pumpIO, and reads and writes in turn, so they share
// the result fields.
//
// On a socket both go through the connection's syscall.RawConn with
// sockio's raw system calls: the connection's deadlines, write lock and
// readiness wait apply as with net.Conn, without the runtime's
// blocking-system-call protocol on every call (sockio explains what that
// costs). Reading holds no pooled buffer while the peer is quiet: the
// buffer is borrowed when the socket is readable and given back when the
// read finds nothing. A connection without a file descriptor (a wrapped or
// in-memory conn) is read with net.Conn.Read after a wait on a small
// array, and written with net.Conn.Write.
//
// The callbacks given to the RawConn are method values bound once in
// init, and their arguments and results live in the struct: a closure
// over locals would escape to the heap, allocations per call.
type pumpIO struct {
	conn  net.Conn
	raw   syscall.RawConn     // nil: no file descriptor (or not on Linux)
	small *[idleReadSize]byte // made on the first plain read (a socket never needs it)

	readFn, writeFn func(fd uintptr) bool // r.readFD, r.writeFD
	s               *session
	sb              *streamBuf // readInto's buffer

	// write's arguments: s.whdr[:hlen] then wp, of which n bytes are out.
	wp   []byte
	hlen int

	n    int   // bytes read, or written so far
	rerr error // the errno of the failed call
}

func (r *pumpIO) init(s *session, c net.Conn) {
	r.conn, r.s = c, s
	if !sockio.Raw {
		return
	}
	r.writeFn = r.writeFD // the other connection may be a socket
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			r.raw, r.readFn = raw, r.readFD
		}
	}
}

// readInto appends what the connection has to sb, waiting when there is
// nothing. sb's buffer is taken from the pool only when bytes are there.
// It returns an error only when no byte was read; it may return nil
// having read nothing (sb full).
func (r *pumpIO) readInto(sb *streamBuf) error {
	if r.raw == nil {
		return r.readPlain(sb)
	}
	if sb.b != nil && sb.n == len(*sb.b) {
		return nil
	}
	r.sb = sb
	err := r.raw.Read(r.readFn)
	n, rerr := r.n, r.rerr
	r.sb, r.n, r.rerr = nil, 0, nil
	switch {
	case err != nil:
		r.s.release(sb)
		return err
	case rerr != nil:
		r.s.release(sb)
		return rerr
	case n == 0:
		r.s.release(sb)
		return io.EOF
	}
	sb.n += n
	return nil
}

// readFD is the raw.Read callback: it borrows r.sb's buffer (if it holds
// none) and reads into its free part; when there is nothing to read it
// gives a borrowed buffer back and waits for readability.
func (r *pumpIO) readFD(fd uintptr) bool {
	buf := r.s.take(r.sb)[r.sb.n:]
	for {
		n, errno := sockio.Read(fd, buf)
		switch errno {
		case 0:
			r.n = n
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			r.s.release(r.sb)
			return false
		default:
			r.rerr = errno
			return true
		}
	}
}

// readPlain reads with net.Conn.Read: into the free part of sb's buffer
// when a frame is in progress, else into the small array first.
func (r *pumpIO) readPlain(sb *streamBuf) error {
	s := r.s
	if sb.n == 0 {
		s.release(sb)
		if r.small == nil {
			r.small = new([idleReadSize]byte)
		}
		n, err := r.conn.Read(r.small[:])
		if n > 0 {
			sb.n = copy(s.take(sb), r.small[:n])
			return nil
		}
		return err
	}
	buf := *sb.b
	n, err := r.conn.Read(buf[sb.n:])
	sb.n += n
	if n > 0 {
		return nil
	}
	return err
}

// write sends s.whdr[:hlen] then p to dst's connection whole, in one
// writev where the socket takes it all, waiting for room until dst's
// write deadline, under its write lock (so nothing else written to the
// connection lands inside). It returns the bytes of p written. dst must
// have a RawConn (canWrite).
func (r *pumpIO) write(dst *pumpIO, hlen int, p []byte) (int, error) {
	r.wp, r.hlen, r.n, r.rerr = p, hlen, 0, nil
	err := dst.raw.Write(r.writeFn)
	n, werr := r.n-hlen, r.rerr
	r.wp, r.hlen, r.n, r.rerr = nil, 0, 0, nil // hold no reference to a pooled buffer
	if err == nil && werr != nil {
		err = writeError(dst.conn, werr)
	}
	return max(n, 0), err
}

// canWrite says write can send to r's connection.
func (r *pumpIO) canWrite() bool { return r.raw != nil }

// writeFD is the raw.Write callback: writev until everything is out, or
// the socket is full (wait for room), or an error.
func (r *pumpIO) writeFD(fd uintptr) bool {
	hdr := r.s.whdr[:r.hlen]
	for {
		var a, b []byte
		if r.n < len(hdr) {
			a, b = hdr[r.n:], r.wp
		} else {
			b = r.wp[r.n-len(hdr):]
		}
		if len(a)+len(b) == 0 {
			return true
		}
		n, errno := sockio.Write2(fd, a, b)
		switch errno {
		case 0:
			r.n += n
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			r.rerr = errno
			return true
		}
	}
}

// writeError is a failed write as net.Conn.Write reports it.
func writeError(c net.Conn, err error) error {
	local, remote := c.LocalAddr(), c.RemoteAddr()
	return &net.OpError{Op: "write", Net: local.Network(), Source: local, Addr: remote, Err: os.NewSyscallError("writev", err)}
}
