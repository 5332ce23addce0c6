package probe

import (
	"errors"
	"fmt"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/wsstream"
	"github.com/wirekube/relay-ws/relayproto"
)

// check is the default mode (subprotocol wirekube.relay.probe.v1,
// docs/spec.md#probe-subprotocol): the gateway upgraded only after dialing
// the relay, so the upgrade already proved relay reachability; the probe
// sends its Register, which the bridge compares with the WireKubePeer's key
// and never forwards, and reads the verdict from the close frame.
func (s *session) check() {
	s.fr = relayproto.NewReader(wsstream.NewReader(s.conn))
	start := s.now()
	st := Stage{Name: StageRegister, Key: s.cfg.key.Fingerprint()}
	if s.conn.Subprotocol() != contract.SubprotocolProbe {
		// An older gateway without the probe subprotocol would have refused
		// the upgrade; anything else is a proxy that rewrote the header.
		st.Status, st.Duration = StatusFailed, s.now().Sub(start)
		st.Error = fmt.Sprintf("the gateway selected subprotocol %q, not %s: nothing was sent", s.conn.Subprotocol(), contract.SubprotocolProbe)
		s.res.add(st)
		s.res.fail(ExitRejected, "", "the gateway does not speak the probe subprotocol: upgrade wirekube-bridge, or run with --register (replaces the node's live session)")
		return
	}
	err := s.write(relayproto.AppendRegister(nil, s.cfg.key))
	if err == nil {
		_ = s.conn.SetReadDeadline(s.now().Add(s.cfg.timeout))
		for err == nil {
			_, err = s.fr.ReadFrame()
		}
	}
	st.Duration = s.now().Sub(start)
	var ce *websocket.CloseError
	if errors.As(err, &ce) && ce.Code == websocket.CloseNormalClosure && ce.Text == string(contract.CloseProbeOK) {
		st.Status = StatusOK
		st.Detail = "key " + s.cfg.key.Fingerprint() + " is the WireKubePeer's; the gateway reached the relay and sent it nothing (the node's live session is untouched)"
		s.res.add(st)
		s.res.add(Stage{Name: StageEcho, Status: StatusSkipped,
			Detail: "check mode: no round trip through the relay (--register runs it, and replaces the node's live session)"})
		return
	}
	s.res.add(st)
	if isTimeout(err) {
		st := s.res.stage(StageRegister)
		st.Status, st.Error = StatusFailed, fmt.Sprintf("no verdict from the gateway within %s", s.cfg.timeout)
		s.res.fail(ExitEchoTimeout, "", "the gateway upgraded but never answered the probe's Register: check the bridge's logs and version")
		return
	}
	s.fail(StageRegister, err)
}
