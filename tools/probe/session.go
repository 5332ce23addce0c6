package probe

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/wsstream"
	"github.com/wirekube/relay-ws/relayproto"
)

// session runs Register and the echo round trips on an upgraded connection.
// It is used by one goroutine; gorilla answers pings while it reads.
type session struct {
	cfg  Config
	res  *Result
	conn *websocket.Conn
	now  func() time.Time
	fr   *relayproto.Reader
}

// errRelay is an Error frame (0xFF) from the relay.
type errRelay struct{ text string }

func (e *errRelay) Error() string { return "relay error frame: " + e.text }

// payloadMagic starts every echo payload so the probe's own frames are
// told apart from other traffic addressed to the same key.
const payloadMagic = "wirekube-relay-probe/1 "

func (s *session) run() {
	s.fr = relayproto.NewReader(wsstream.NewReader(s.conn))
	start := s.now()
	if err := s.write(relayproto.AppendRegister(nil, s.cfg.key)); err != nil {
		s.res.add(Stage{Name: StageRegister, Status: StatusFailed, Duration: s.now().Sub(start), Key: s.cfg.key.Fingerprint()})
		s.fail(StageRegister, s.closeAfterWrite(err))
		return
	}
	s.res.add(Stage{Name: StageRegister, Status: StatusOK, Duration: s.now().Sub(start), Key: s.cfg.key.Fingerprint(),
		Detail: "sent Register for key " + s.cfg.key.Fingerprint() + " (no ack in the protocol: the echo confirms it)"})
	s.echo()
}

// echo sends Data frames to the probe's own key; the relay returns each
// with the key rewritten to the sender's, which is the same key.
func (s *session) echo() {
	info := &EchoInfo{}
	var total, lo, hi time.Duration
	start := s.now()
	var err error
	for i := 0; i < s.cfg.count && err == nil; i++ {
		payload := echoPayload(uint64(i))
		t0 := s.now()
		if err = s.write(relayproto.AppendData(nil, s.cfg.key, payload)); err != nil {
			err = s.closeAfterWrite(err)
			break
		}
		info.Sent++
		if err = s.awaitEcho(payload); err != nil {
			break
		}
		rtt := s.now().Sub(t0)
		info.Received++
		total += rtt
		if lo == 0 || rtt < lo {
			lo = rtt
		}
		hi = max(hi, rtt)
	}
	if info.Received > 0 {
		info.MinMS, info.AvgMS, info.MaxMS = ms(lo), ms(total/time.Duration(info.Received)), ms(hi)
	}
	st := s.res.add(Stage{Name: StageEcho, Status: StatusOK, Duration: s.now().Sub(start), Echo: info,
		Detail: fmt.Sprintf("%d/%d round trips through the relay", info.Received, s.cfg.count)})
	if info.Received > 0 {
		st.Detail += fmt.Sprintf(", rtt min %s avg %s max %s", lo.Round(time.Microsecond),
			(total / time.Duration(info.Received)).Round(time.Microsecond), hi.Round(time.Microsecond))
	}
	switch {
	case err == nil:
		if s.cfg.idle > 0 {
			s.holdIdle()
		}
	case info.Received == 0 && !isTimeout(err):
		// Closed before the relay carried anything: Register was refused.
		st.Status, st.Detail = StatusSkipped, "the session ended before any echo"
		s.fail(StageRegister, err)
	default:
		st.Status = StatusFailed
		s.fail(StageEcho, err)
	}
}

func echoPayload(seq uint64) []byte {
	p := make([]byte, 0, len(payloadMagic)+16)
	p = append(p, payloadMagic...)
	p = binary.BigEndian.AppendUint64(p, seq)
	var nonce [8]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails
	return append(p, nonce[:]...)
}

// awaitEcho reads until the echo of payload arrives, answering RelayProbe
// frames as an agent does and skipping other traffic.
func (s *session) awaitEcho(payload []byte) error {
	_ = s.conn.SetReadDeadline(s.now().Add(s.cfg.timeout))
	for {
		f, err := s.fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f.Type {
		case relayproto.TypeData:
			k, p, err := relayproto.ParseData(f.Body)
			if err == nil && k.Equal(s.cfg.key) && bytes.Equal(p, payload) {
				return nil
			}
		case relayproto.TypeRelayProbe:
			if err := s.write(relayproto.AppendFrame(nil, relayproto.TypeRelayProbe, f.Body)); err != nil {
				return s.closeAfterWrite(err)
			}
		case relayproto.TypeError:
			return &errRelay{text: sanitize(string(f.Body), 200)}
		}
	}
}

func (s *session) write(frame []byte) error {
	_ = s.conn.SetWriteDeadline(s.now().Add(s.cfg.timeout))
	return s.conn.WriteMessage(websocket.BinaryMessage, frame)
}

// closeAfterWrite looks for the close frame that explains a failed write:
// the gateway may have closed the session (e.g. register_key_mismatch)
// before our frame got out.
func (s *session) closeAfterWrite(werr error) error {
	_ = s.conn.SetReadDeadline(s.now().Add(min(s.cfg.timeout, 2*time.Second)))
	for {
		if _, err := s.fr.ReadFrame(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return err
			}
			return werr
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// fail records a session error on the stage it belongs to.
func (s *session) fail(stage string, err error) {
	st := s.res.stage(stage)
	st.Status = StatusFailed
	if stage == StageRegister {
		st.Detail = "Register for key " + s.cfg.key.Fingerprint() + " refused:"
	}
	var ce *websocket.CloseError
	switch {
	case errors.As(err, &ce):
		st.CloseCode, st.CloseReason = ce.Code, sanitize(ce.Text, 123)
		st.Error = fmt.Sprintf("closed by the gateway: %d %s", ce.Code, st.CloseReason)
		reason := reasonPrefix(st.CloseReason)
		fix, ok := FixFor(contract.Reason(reason))
		if !ok {
			reason, fix = "", fixForCloseCode(ce.Code)
		}
		s.res.fail(ExitClosed, reason, fix)
	case errors.As(err, new(*errRelay)):
		st.Error = err.Error()
		s.res.fail(ExitClosed, "", "the relay answered with an Error frame: read its text above and the relay's logs")
	case isTimeout(err):
		st.Error = fmt.Sprintf("no echo within %s", s.cfg.timeout)
		s.res.fail(ExitEchoTimeout, "", "the session was accepted but the relay did not return a Data frame sent to our own key: check the bridge's raw relay connection (/readyz) and the relay's logs")
	default:
		st.Error = "connection lost: " + err.Error()
		s.res.fail(ExitClosed, "", fixForCloseCode(websocket.CloseAbnormalClosure))
	}
}

// reasonPrefix is the leading reason code of a close text ("code" or
// "code: detail").
func reasonPrefix(text string) string {
	for i, r := range text {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return text[:i]
		}
	}
	return text
}

// close says goodbye with 1000 and closes the connection.
func (s *session) close() {
	_ = s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
		s.now().Add(time.Second))
	_ = s.conn.Close()
}
