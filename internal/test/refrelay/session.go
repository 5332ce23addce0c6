package refrelay

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/wirekube/relay-ws/relayproto"
)

// Buffer sizes of a peer session. The read buffer is allocated at
// registration; the write buffer only when the first frame is delivered, so
// an idle registered session holds little memory.
const (
	readBufSize  = 16 << 10
	writeBufSize = 32 << 10
)

// session is one registered peer. Its queue is written by any sender's read
// goroutine and drained by the session's own writer goroutine. A frame put
// into the queue is owned by the writer from then on.
type session struct {
	key   relayproto.Key
	conn  net.Conn
	queue chan []byte
	done  chan struct{} // closed once by close; stops the writer

	closeOnce sync.Once
}

// close ends the session: the writer stops and the reader's next read fails.
// Safe to call from any goroutine, any number of times.
func (ss *session) close() {
	ss.closeOnce.Do(func() {
		close(ss.done)
		ss.conn.Close()
	})
}

// runSession serves a registered peer until its connection ends. It owns
// the writer goroutine and waits for it before returning.
func (s *Server) runSession(conn net.Conn, k relayproto.Key) {
	ss := &session{
		key:   k,
		conn:  conn,
		queue: make(chan []byte, s.cfg.queueDepth),
		done:  make(chan struct{}),
	}
	s.register(ss)
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { s.writeLoop(ss) })
	err := s.readLoop(ss)
	ss.close()
	wg.Wait()
	s.unregister(ss)
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		err = nil
	}
	s.cfg.log.Info("session end", "key", k.Fingerprint(), "remote", conn.RemoteAddr().String(),
		"duration", time.Since(start), "err", err)
}

// register makes ss the live session of its key; an older session of the
// same key is closed (the real relay's replacement rule).
func (s *Server) register(ss *session) {
	s.mu.Lock()
	old := s.sessions[ss.key]
	s.sessions[ss.key] = ss
	s.regs[ss.key]++
	// Counted under the lock so Stats agrees with RegisterCount.
	s.stats.registrations.Add(1)
	if old != nil {
		s.stats.replacements.Add(1)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	if old != nil {
		old.close()
	}
	s.cfg.log.Info("session registered", "key", ss.key.Fingerprint(),
		"remote", ss.conn.RemoteAddr().String(), "replaced", old != nil)
}

// unregister forgets ss unless a newer session already replaced it.
func (s *Server) unregister(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[ss.key] == ss {
		delete(s.sessions, ss.key)
	}
}

func (s *Server) lookup(k relayproto.Key) *session {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.sessions[k]
}

// readLoop handles frames until the connection fails or closes.
func (s *Server) readLoop(ss *session) error {
	fr := relayproto.NewReader(bufio.NewReaderSize(ss.conn, readBufSize))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			s.readFailed(ss.conn, "session", err)
			return err
		}
		s.handleFrame(ss, f)
	}
}

// handleFrame acts on one frame of a registered peer. f.Body is only valid
// during the call.
func (s *Server) handleFrame(ss *session, f relayproto.Frame) {
	switch f.Type {
	case relayproto.TypeData, relayproto.TypeBimodalHint:
		s.forward(ss, f)
	case relayproto.TypeKeepalive, relayproto.TypeNATProbe, relayproto.TypeRelayProbe, relayproto.TypeExternalData:
		s.stats.ignored.Add(1)
	default:
		// A second Register lands here too: the real relay logs it as an
		// unknown type and ignores it.
		if f.Type == relayproto.TypeRegister {
			s.stats.secondRegisters.Add(1)
		}
		s.stats.unknown.Add(1)
		s.cfg.log.Info("unknown frame type ignored", "key", ss.key.Fingerprint(),
			"type", f.Type.GoString(), "len", len(f.Body))
	}
}

// forward delivers a Data or BimodalHint frame to its destination with the
// destination key rewritten to the sender's key. The only allocation is the
// outgoing frame, which the destination's writer then owns.
func (s *Server) forward(ss *session, f relayproto.Frame) {
	if len(f.Body) < relayproto.KeySize {
		s.stats.droppedShort.Add(1)
		s.cfg.log.Info("frame shorter than a key dropped", "key", ss.key.Fingerprint(),
			"type", f.Type.String(), "len", len(f.Body))
		return
	}
	dstKey, _ := relayproto.KeyFromBytes(f.Body[:relayproto.KeySize])
	dst := s.lookup(dstKey)
	if dst == nil {
		s.stats.droppedNoDestination.Add(1)
		return
	}
	payload := f.Body[relayproto.KeySize:]
	out := make([]byte, 0, relayproto.HeaderSize+len(f.Body))
	out = relayproto.AppendFrame(out, f.Type, ss.key[:], payload)
	// Counted before the frame is queued, so a test that has received it
	// also sees it counted; undone if the queue was full.
	s.stats.forwarded.Add(1)
	s.stats.forwardedBytes.Add(uint64(len(payload)))
	if !s.enqueue(dst, out) {
		s.stats.forwarded.Add(^uint64(0))
		s.stats.forwardedBytes.Add(-uint64(len(payload)))
	}
}

// enqueue hands a whole frame to dst's writer. When the queue is full the
// frame (the newest) is dropped and counted, silently, as the real relay
// does.
func (s *Server) enqueue(dst *session, frame []byte) bool {
	select {
	case dst.queue <- frame:
		return true
	default:
		s.stats.droppedQueueFull.Add(1)
		return false
	}
}

// writeLoop drains the session's queue into its connection until the
// session is closed or a write fails. A write blocked for the stall timeout
// disconnects the peer.
func (s *Server) writeLoop(ss *session) {
	var bw *bufio.Writer
	for {
		select {
		case <-ss.done:
			return
		case f := <-ss.queue:
			if bw == nil {
				bw = bufio.NewWriterSize(stallWriter{ss.conn, s.cfg.stall}, writeBufSize)
			}
			if err := s.writeBatch(ss, bw, f); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					s.stats.stallDisconnects.Add(1)
					s.cfg.log.Info("reader stalled, disconnecting", "key", ss.key.Fingerprint(),
						"stall_timeout", s.cfg.stall)
				}
				ss.close()
				return
			}
		}
	}
}

// writeBatch writes first and every frame already queued, then flushes, so
// frames are coalesced only when they were waiting anyway.
func (s *Server) writeBatch(ss *session, bw *bufio.Writer, first []byte) error {
	f := first
	for {
		if _, err := bw.Write(f); err != nil {
			return err
		}
		s.stats.written.Add(1)
		select {
		case f = <-ss.queue:
		default:
			return bw.Flush()
		}
	}
}

// stallWriter gives each write to the connection its own deadline, so the
// stall timeout measures one blocked write, not a whole batch.
type stallWriter struct {
	conn  net.Conn
	stall time.Duration
}

func (w stallWriter) Write(p []byte) (int, error) {
	if err := w.conn.SetWriteDeadline(time.Now().Add(w.stall)); err != nil {
		return 0, err
	}
	return w.conn.Write(p)
}
