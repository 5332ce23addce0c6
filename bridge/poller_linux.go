package bridge

import (
	"errors"
	"os"
	"sync"
	"syscall"
)

// pollerSupported: readers may park on this platform.
const pollerSupported = true

// poller waits, for all sessions at once, on the connections whose reader
// has given up its goroutine (park.go): one epoll instance, each
// connection armed for one event at a time (EPOLLONESHOT), and one
// goroutine that waits on the epoll descriptor through the runtime's own
// netpoller, so it holds no thread while waiting. An event hands the
// connection back to a new reader goroutine (session.unpark). A closed
// connection leaves the epoll set by itself (it is its last descriptor);
// the session's entry goes with forget.
type poller struct {
	f    *os.File
	raw  syscall.RawConn
	epfd int // f's descriptor (f.Fd would make it blocking)

	mu     sync.Mutex
	closed bool
	next   uint64
	parked map[uint64]*session // by parkID: sessions armed at least once
	done   chan struct{}
}

// newPoller makes a poller and starts its goroutine; close stops it.
func newPoller() (*poller, error) {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "epoll") // non-blocking: waited on by the netpoller
	raw, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	p := &poller{f: f, raw: raw, epfd: fd, parked: make(map[uint64]*session), done: make(chan struct{})}
	go p.run()
	return p, nil
}

// pollEvents are the conditions that wake a parked reader: bytes, the
// peer's FIN, an error or a hang-up.
const pollEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT

// arm registers (first call for the direction) or re-arms fd, the
// connection of the session's direction dir, for one event. It fails once
// the poller is closed. The caller holds s.mu.
func (p *poller) arm(s *session, dir int, fd int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errPollerClosed
	}
	if s.parkID == 0 {
		p.next++
		s.parkID = p.next
		p.parked[s.parkID] = s
	}
	op := syscall.EPOLL_CTL_MOD
	if !s.armed[dir] {
		op = syscall.EPOLL_CTL_ADD
	}
	token := s.parkID<<1 | uint64(dir)
	ev := syscall.EpollEvent{Events: pollEvents, Fd: int32(uint32(token)), Pad: int32(uint32(token >> 32))}
	if err := syscall.EpollCtl(p.epfd, op, fd, &ev); err != nil {
		return err
	}
	s.armed[dir] = true
	return nil
}

// forget drops a finished session. Its relay connection is closed by then,
// which removed it from the epoll set.
func (p *poller) forget(s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.parkID != 0 {
		delete(p.parked, s.parkID)
	}
}

var errPollerClosed = errors.New("bridge: poller closed")

func (p *poller) run() {
	defer close(p.done)
	var events [64]syscall.EpollEvent
	for {
		var n int
		err := p.raw.Read(func(fd uintptr) bool {
			var werr error
			n, werr = syscall.EpollWait(int(fd), events[:], 0)
			return n > 0 || (werr != nil && werr != syscall.EINTR)
		})
		if err != nil {
			return // closed
		}
		for _, ev := range events[:max(n, 0)] {
			token := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			p.mu.Lock()
			s := p.parked[token>>1]
			p.mu.Unlock()
			if s != nil {
				s.unpark(int(token & 1))
			}
		}
	}
}

// close stops the poller and waits for its goroutine. Later arms fail.
func (p *poller) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.f.Close()
	<-p.done
}
