package probe

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/relayproto"
)

// holdIdle keeps the registered session idle for cfg.idle the way an idle
// agent does: a Keepalive every AgentKeepalive, RelayProbe frames echoed,
// the gateway's pings answered (gorilla's default handler), nothing else.
// Then one Data frame to the probe's own key must come back. A close
// before that is a hop with an idle timeout shorter than the path's
// traffic: the stage says after how long and whether a close frame came.
//
// gorilla/websocket's read errors are final (a read deadline would end the
// session), so one goroutine reads until the connection ends and hands
// frames to this one, which alone writes; close() ends the reader, and
// holdIdle waits for it.
func (s *session) holdIdle() {
	// The echo's read deadline would end the hold: the hold has none.
	_ = s.conn.SetReadDeadline(time.Time{})
	frames, done := make(chan relayproto.Frame), make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		defer close(done) // after the one send: a later receive never blocks
		for {
			f, err := s.fr.ReadFrame()
			if err != nil {
				done <- err
				return
			}
			select {
			case frames <- f:
			case <-stop:
				return
			}
		}
	}()
	start := s.now()
	err := s.idleLoop(frames, done, start)
	close(stop)
	st := Stage{Name: StageIdle, Duration: s.now().Sub(start)}
	if err == nil {
		st.Status = StatusOK
		st.Detail = fmt.Sprintf("held %s idle as an agent (keepalive every %s), then an echo came back", s.cfg.idle, AgentKeepalive)
		s.res.add(st)
		s.close()
		<-done
		return
	}
	s.close()
	<-done
	idleFailed(s.res, st, err, s.cfg.idle, s.cfg.proxyInfo)
}

// idleLoop runs the idle hold and the final echo; nil means the echo came.
func (s *session) idleLoop(frames <-chan relayproto.Frame, done <-chan error, start time.Time) error {
	end := time.NewTimer(s.cfg.idle)
	defer end.Stop()
	keep := time.NewTicker(AgentKeepalive)
	defer keep.Stop()
	var payload []byte
	var echoBy <-chan time.Time
	for {
		select {
		case err := <-done:
			return &idleClosed{after: s.now().Sub(start), err: err}
		case <-keep.C:
			if err := s.write(relayproto.AppendFrame(nil, relayproto.TypeKeepalive, nil)); err != nil {
				return &idleClosed{after: s.now().Sub(start), err: err}
			}
		case <-end.C:
			payload = echoPayload(uint64(s.cfg.count))
			if err := s.write(relayproto.AppendData(nil, s.cfg.key, payload)); err != nil {
				return &idleClosed{after: s.now().Sub(start), err: err}
			}
			echoBy = time.After(s.cfg.timeout)
		case <-echoBy:
			return fmt.Errorf("no echo within %s after the idle hold", s.cfg.timeout)
		case f := <-frames:
			switch f.Type {
			case relayproto.TypeRelayProbe:
				if err := s.write(relayproto.AppendFrame(nil, relayproto.TypeRelayProbe, f.Body)); err != nil {
					return &idleClosed{after: s.now().Sub(start), err: err}
				}
			case relayproto.TypeData:
				if k, p, err := relayproto.ParseData(f.Body); payload != nil && err == nil && k.Equal(s.cfg.key) && bytes.Equal(p, payload) {
					return nil
				}
			}
		}
	}
}

// idleClosed is the session ending during the idle hold.
type idleClosed struct {
	after time.Duration
	err   error
}

func (e *idleClosed) Error() string { return e.err.Error() }

// idleFailed records the idle stage's failure with the hop it points at.
func idleFailed(res *Result, st Stage, err error, idle time.Duration, proxy *ProxyInfo) {
	st.Status = StatusFailed
	var ic *idleClosed
	if !errors.As(err, &ic) {
		st.Error = err.Error()
		res.add(st)
		res.fail(ExitEchoTimeout, "", "the session survived the idle hold but the relay returned no echo: check the bridge's raw relay connection and the relay's logs")
		return
	}
	after := ic.after.Round(100 * time.Millisecond)
	var ce *websocket.CloseError
	if errors.As(ic.err, &ce) && ce.Code != websocket.CloseAbnormalClosure {
		st.CloseCode, st.CloseReason = ce.Code, sanitize(ce.Text, 123)
		st.Error = fmt.Sprintf("the gateway closed the idle session after %s: %d %s", after, ce.Code, st.CloseReason)
		res.add(st)
		res.fail(ExitIdleClosed, reasonPrefix(st.CloseReason), "the gateway itself ended the idle session: read the close reason above and the bridge's logs")
		return
	}
	hop := "a hop between this node and the bridge (a load balancer or the front)"
	if proxy != nil && proxy.URL != "" {
		hop = "the forward proxy " + proxy.URL + " (or a hop behind it)"
	}
	st.Error = fmt.Sprintf("the connection was cut without a WebSocket close frame after %s idle (of %s): %v", after, idle, ic.err)
	res.add(st)
	res.fail(ExitIdleClosed, "", fmt.Sprintf("%s closes idle connections after about %s, shorter than the agent's %s keepalive and the bridge's pings: raise that idle timeout above 60 s (docs/timeouts.md lists each hop's setting)", hop, after, AgentKeepalive))
}
