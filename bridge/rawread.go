package bridge

import (
	"io"
	"net"
	"syscall"
)

// idleReader reads a connection in a session's reader goroutine without
// holding a pooled buffer while the peer is quiet: on a connection with a
// file descriptor it waits for readability and only then borrows a buffer
// and reads everything available in one call; otherwise (a wrapped or
// in-memory conn) it waits on a small array first.
//
// The callback given to raw.Read is a method value bound once in init, and
// its arguments and results live in the struct: a closure over locals would
// escape to the heap, three allocations per read. One goroutine uses an
// idleReader.
type idleReader struct {
	conn  net.Conn
	raw   syscall.RawConn     // nil: use small
	small *[idleReadSize]byte // made on the first plain read (a socket never needs it)

	readFn func(fd uintptr) bool // r.readFD
	s      *session
	sb     *streamBuf
	n      int
	rerr   error
}

func (r *idleReader) init(c net.Conn) {
	r.conn = c
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			r.raw = raw
			r.readFn = r.readFD
		}
	}
}

// readFD is the raw.Read callback: it borrows r.sb's buffer only when the
// read returns bytes.
func (r *idleReader) readFD(fd uintptr) bool {
	buf := r.s.take(r.sb)
	r.n, r.rerr = syscall.Read(int(fd), buf)
	if r.rerr == syscall.EAGAIN || r.rerr == syscall.EINTR {
		r.s.release(r.sb) // wait for readability without a buffer
		return false
	}
	return true
}

// readInto appends what the connection has to sb, waiting when there is
// nothing. sb's buffer is taken from the pool only when bytes are there.
// It returns an error only when no byte was read; it may return nil
// having read nothing.
func (r *idleReader) readInto(s *session, sb *streamBuf) error {
	if sb.n > 0 || r.raw == nil {
		return r.readPlain(s, sb)
	}
	r.s, r.sb = s, sb
	err := r.raw.Read(r.readFn)
	n, rerr := r.n, r.rerr
	r.s, r.sb, r.rerr = nil, nil, nil
	switch {
	case err != nil:
		s.release(sb)
		return err
	case rerr != nil:
		s.release(sb)
		return rerr
	case n == 0:
		s.release(sb)
		return io.EOF
	}
	sb.n = n
	return nil
}

// readPlain reads with net.Conn.Read: into the free part of sb's buffer
// when a frame is in progress, else into the small array first.
func (r *idleReader) readPlain(s *session, sb *streamBuf) error {
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
