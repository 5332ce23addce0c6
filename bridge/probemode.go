package bridge

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// The probe subprotocol (contract.SubprotocolProbe). A client
// that offers it and not wirekube.relay.v1 goes through every check an
// agent does — the proxy's authorization, the identity headers, the
// key-mismatch backoff, the per-peer limits, and a relay dial (held like
// an agent's during a relay outage) — and is upgraded only when the relay
// answered. The bridge closes that relay connection without writing a
// byte, so the relay never sees a Register and the node's live session is
// left alone. The client then sends one Register frame; the bridge checks
// it against the vouched key exactly as for a session and closes:
//
//	1000 probe_ok               the key is the peer's
//	1008 register_key_mismatch  (or another register_* reason)
//	1008 register_timeout       nothing within --register-timeout
//
// A probe's mismatch does not count for the key-mismatch backoff.

// isProbe reports a probe-mode request: it offers the probe subprotocol
// and not the agent's (an offer of both is a session).
func isProbe(r *http.Request) bool {
	offered := websocket.Subprotocols(r)
	return slices.Contains(offered, contract.SubprotocolProbe) && !slices.Contains(offered, contract.Subprotocol)
}

// probeReadLimit bounds a probe's input: one Register frame is 37 bytes.
const probeReadLimit = 64

// serveProbe runs one probe session to its end. The relay connection was
// already closed by the caller. decided runs once the verdict is known,
// before the close frame is written: a client that probes again after
// reading the verdict finds the peer's share free.
func (s *Server) serveProbe(ws *websocket.Conn, id peerIdentity, remote string, decided func()) {
	defer ws.Close()
	ce := s.probeRegister(ws, id)
	decided()
	s.metrics.probes.WithLabelValues(string(ce.reason)).Inc()
	attrs := []slog.Attr{slog.String("peer", id.Peer), slog.String("identity", id.Subject),
		slog.String("key", id.Key.Fingerprint()), slog.String("client_address", id.ClientAddress), slog.String("remote", remote), slog.String("request_id", id.RequestID),
		slog.Int("close_code", ce.code), slog.String("close_reason", string(ce.reason))}
	if ce.err != nil {
		attrs = append(attrs, slog.String("error", ce.err.Error()))
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "probe session", attrs...)
	if ce.code == 0 {
		return
	}
	// The linger counts against the peer (internal/peerlimit/probe.go): past its share
	// the probe closes at once.
	s.closeLingering(ws, ce, func() (func(), bool) {
		return func() { s.peers.limits.EndLinger(id.Peer) }, s.peers.limits.StartLinger(id.Peer)
	})
}

// closeLingering sends ce's close frame and, when hold grants it, waits
// until the close grace (or --write-timeout, the shorter) for the client's
// close answer or EOF, so that the frame is not lost to a reset (closing
// with unread client bytes makes Linux send RST). hold bounds how many wait
// at once; release is called when the wait ends.
func (s *Server) closeLingering(ws *websocket.Conn, ce *closeError, hold func() (release func(), ok bool)) {
	deadline := time.Now().Add(min(s.cfg.WriteTimeout, s.closeGrace))
	if ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(ce.code, string(ce.reason)), deadline) != nil {
		return
	}
	release, ok := hold()
	if !ok {
		return
	}
	defer release()
	_ = ws.SetReadDeadline(deadline)
	for {
		if _, _, err := ws.NextReader(); err != nil {
			return
		}
	}
}

// probeRegister reads the probe's Register and judges it like a session's
// first frame.
func (s *Server) probeRegister(ws *websocket.Conn, id peerIdentity) *closeError {
	ws.SetReadLimit(probeReadLimit)
	_ = ws.SetReadDeadline(time.Now().Add(s.cfg.RegisterTimeout))
	f := frameFilter{key: id.Key}
	var buf []byte
	for {
		mt, p, err := ws.ReadMessage()
		if err != nil {
			return probeReadClose(err)
		}
		if mt != websocket.BinaryMessage {
			return closeWith(websocket.CloseUnsupportedData, contract.CloseTextMessage, nil)
		}
		buf = append(buf, p...)
		if len(buf) > probeReadLimit {
			return closeWith(websocket.ClosePolicyViolation, contract.CloseRegisterMalformed, errors.New("probe input over 64 bytes"))
		}
		_, err = f.scan(buf, func([]byte) error { return nil })
		var cerr *closeError
		switch {
		case errors.As(err, &cerr):
			return cerr
		case f.registered:
			return closeWith(websocket.CloseNormalClosure, contract.CloseProbeOK, nil)
		case len(buf) >= relayproto.HeaderSize+relayproto.KeySize:
			return closeWith(websocket.ClosePolicyViolation, contract.CloseRegisterMalformed, errors.New("no whole Register frame"))
		}
	}
}

func probeReadClose(err error) *closeError {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return closeWith(websocket.ClosePolicyViolation, contract.CloseRegisterTimeout, nil)
	}
	if errors.Is(err, websocket.ErrReadLimit) {
		return closeWith(websocket.CloseMessageTooBig, contract.CloseFrameTooLarge, err)
	}
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return closeWith(0, contract.ResultClientClosed, err)
	}
	return closeWith(0, contract.ResultClientGone, err)
}
