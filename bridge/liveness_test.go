package bridge

import (
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

// pipeSession is a registered session whose relay end the test holds.
func pipeSession(t *testing.T, mod func(*Options)) (*harness, *websocket.Conn, net.Conn) {
	t.Helper()
	pr := newPipeRelay()
	h := startBridge(t, func(o *Options) {
		o.DialRelay = pr.dial
		if mod != nil {
			mod(o)
		}
	})
	ws, relayEnd := pipeRegister(t, h, pr, testKey(1))
	return h, ws, relayEnd
}

// pipeRegister opens a session of key k on h, whose relay dials pr, and
// returns it once the relay end has read its Register.
func pipeRegister(t *testing.T, h *harness, pr *pipeRelay, k relayproto.Key) (*websocket.Conn, net.Conn) {
	t.Helper()
	ws := h.dial(t, identity(k))
	relayEnd := pr.next(t)
	send(t, ws, relayproto.AppendRegister(nil, k))
	got := make([]byte, relayproto.HeaderSize+relayproto.KeySize)
	_ = relayEnd.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(relayEnd, got); err != nil {
		t.Fatalf("relay end: %v", err)
	}
	_ = relayEnd.SetReadDeadline(time.Time{})
	return ws, relayEnd
}

// TestRelayToClientWholeFrames: each message holds whole frames; frames that
// arrive together are coalesced up to the bound; none waits for another.
func TestRelayToClientWholeFrames(t *testing.T) {
	_, ws, relayEnd := pipeSession(t, nil)
	src := testKey(9)
	var burst []byte
	for i := range uint32(100) { // 100 x 1,442 bytes: more than one message
		burst = append(burst, dataFrame(src, i, 1400)...)
	}
	go func() { _, _ = relayEnd.Write(burst) }()
	msgs, frames := 0, 0
	for frames < 100 {
		_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, msg, err := ws.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if len(msg) > coalesceLimit {
			t.Fatalf("message of %d bytes over the %d bound", len(msg), coalesceLimit)
		}
		frames += len(splitWhole(t, msg))
		msgs++
	}
	if msgs < 3 || msgs > 10 {
		t.Errorf("100 frames came in %d messages, want coalescing into a few", msgs)
	}

	// A frame split across relay writes arrives whole, and alone: it does
	// not wait for the next frame. A net.Pipe write returns only once the
	// bridge has read all of it, and no read spans two writes, so the bridge
	// sees three separate pieces.
	frame := dataFrame(src, 500, 1400)
	go func() {
		for _, piece := range [][]byte{frame[:3], frame[3:700], frame[700:]} {
			if _, err := relayEnd.Write(piece); err != nil {
				return
			}
		}
	}()
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, msg, err := ws.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	if fs := splitWhole(t, msg); len(fs) != 1 {
		t.Fatalf("got %d frames, want 1", len(fs))
	}
}

func TestRelayClosingSends1011(t *testing.T) {
	_, ws, relayEnd := pipeSession(t, nil)
	relayEnd.Close()
	expectClose(t, ws, websocket.CloseInternalServerErr, contract.CloseRelayLost)
}

func TestRelayBadFrameSends1011(t *testing.T) {
	_, ws, relayEnd := pipeSession(t, nil)
	go func() { _, _ = relayEnd.Write(rawHeader(relayproto.MaxFrameSize+1, relayproto.TypeData)) }()
	expectClose(t, ws, websocket.CloseInternalServerErr, contract.CloseRelayLost)
}

func TestClientClosingClosesRelay(t *testing.T) {
	tests := []struct {
		name   string
		close  func(ws *websocket.Conn)
		result contract.Reason
	}{
		{"close frame", func(ws *websocket.Conn) {
			_ = ws.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		}, contract.ResultClientClosed},
		{"tcp close", func(ws *websocket.Conn) { ws.NetConn().Close() }, contract.ResultClientGone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ws, relayEnd := pipeSession(t, nil)
			tt.close(ws)
			_ = relayEnd.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := relayEnd.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
				t.Fatalf("relay end read: %v, want EOF", err)
			}
			h.stop()
			if n := promtest.ToFloat64(h.srv.metrics.sessions.WithLabelValues(string(tt.result))); n != 1 {
				t.Errorf("sessions_total{result=%q} = %v", tt.result, n)
			}
		})
	}
}

// TestPingsAndSilentClient: a registered client that answers nothing is
// pinged every interval and closed (ping_timeout, no close frame) once it
// has been silent for 3.25 intervals (the read deadline set at its
// Register). Exact in a synctest bubble.
func TestPingsAndSilentClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 50 * time.Millisecond
		b := startBubble(t, func(o *Options) { o.PingInterval = interval })
		ws, relayEnd := b.register(t, testKey(1))
		start := time.Now()
		pings := make(chan time.Duration, 100)
		ws.SetPingHandler(func(string) error { pings <- time.Since(start); return nil }) // and never answer
		go func() {
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					return
				}
			}
		}()
		if _, err := relayEnd.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("relay end: %v, want EOF after the silence timeout", err)
		}
		// docs/spec.md#close-reasons: 3 to 3.25 intervals; the Register
		// set the read deadline 3.25 intervals ahead and nothing moved it.
		if d, want := time.Since(start), 3*interval+interval/4; d != want {
			t.Errorf("closed %s after the last client frame, want %s (3.25 ping intervals)", d, want)
		}
		synctest.Wait() // the client's reader has handled everything sent to it
		var at []time.Duration
		for len(pings) > 0 {
			at = append(at, <-pings)
		}
		if want := []time.Duration{interval, 2 * interval, 3 * interval}; !slices.Equal(at, want) {
			t.Errorf("pings at %v, want %v", at, want)
		}
		b.stop()
		if n := promtest.ToFloat64(b.srv.metrics.sessions.WithLabelValues(string(contract.ClosePingTimeout))); n != 1 {
			t.Errorf("sessions_total{result=ping_timeout} = %v", n)
		}
	})
}

// TestAnsweringClientStaysOpen: a client that answers every ping stays
// registered well past three intervals.
func TestAnsweringClientStaysOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 30 * time.Millisecond
		b := startBubble(t, func(o *Options) { o.PingInterval = interval })
		ws, relayEnd := b.register(t, testKey(1))
		pings := make(chan struct{}, 100)
		ws.SetPingHandler(func(data string) error {
			pings <- struct{}{}
			return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
		})
		go func() {
			for { // ReadMessage runs the ping handler
				if _, _, err := ws.ReadMessage(); err != nil {
					return
				}
			}
		}()
		for range 10 { // ten answered pings: over three times the silence limit
			<-pings
		}
		_ = relayEnd.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := relayEnd.Write(relayproto.AppendFrame(nil, relayproto.TypeKeepalive)); err != nil {
			t.Fatalf("session died although the client answered pings: %v", err)
		}
	})
}

// TestStuckClientClosesOnlyItsSession: a client that stops reading is cut
// once a write to it has waited the write timeout (client_write_failed);
// another session of the same bridge still carries Data both ways
// afterwards. In a synctest bubble: the stuck client's pipe never reads, so
// the bridge's write blocks until its deadline, and the other session's
// writes cannot reach theirs first on a slow machine.
func TestStuckClientClosesOnlyItsSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startBubble(t, func(o *Options) {
			o.WriteTimeout = 200 * time.Millisecond
			o.PingInterval = time.Hour // no ping to the other client, which reads only later
		})
		_, stuckRelay := b.register(t, testKey(1)) // its client never reads
		other, otherRelay := b.register(t, testKey(2))
		frame := dataFrame(testKey(9), 1, relayproto.MaxBodySize-relayproto.KeySize)
		done := make(chan error, 1)
		go func() {
			for {
				if _, err := stuckRelay.Write(frame); err != nil {
					done <- err
					return
				}
			}
		}()
		<-done // the bridge closed the stuck session's relay end
		synctest.Wait()
		failed := b.srv.metrics.sessions.WithLabelValues(string(contract.ResultClientWriteFailed))
		if n := promtest.ToFloat64(failed); n != 1 {
			t.Fatalf("sessions_total{result=client_write_failed} = %v once the stuck session ended, want 1", n)
		}

		// The other session is still open, both ways.
		toClient := dataFrame(testKey(9), 7, 16)
		go func() { _, _ = otherRelay.Write(toClient) }()
		if _, msg, err := other.ReadMessage(); err != nil || string(msg) != string(toClient) {
			t.Fatalf("other session read %x, %v; want %x", msg, err, toClient)
		}
		toRelay := relayproto.AppendData(nil, testKey(9), []byte("still here"))
		send(t, other, toRelay) // returns once the bridge has read it; its relay write waits for the read below
		got := make([]byte, len(toRelay))
		if _, err := io.ReadFull(otherRelay, got); err != nil || string(got) != string(toRelay) {
			t.Fatalf("other session, client to relay: %x, %v; want %x", got, err, toRelay)
		}
		synctest.Wait()
		if n := promtest.ToFloat64(failed); n != 1 {
			t.Errorf("sessions_total{result=client_write_failed} = %v, want 1", n)
		}
	})
}

func TestRelayUnavailableAndCapacity(t *testing.T) {
	down := startBridge(t, func(o *Options) { o.RelayAddr = testutil.ClosedAddr(t) })
	expectDeny(t, down.url, contract.ReasonRelayUnavailable)

	full := startBridge(t, func(o *Options) { o.MaxSessions = 1 })
	full.register(t, testKey(1))
	expectDeny(t, full.url, contract.ReasonAtCapacity)
}

func expectDeny(t *testing.T, url string, reason contract.Reason) {
	t.Helper()
	expectDenyVia(t, websocket.Dialer{}, url, reason)
}

// expectDenyVia expects an upgrade through d to be refused with reason.
func expectDenyVia(t *testing.T, d websocket.Dialer, url string, reason contract.Reason) {
	t.Helper()
	d.Subprotocols = []string{contract.Subprotocol}
	ws, resp, err := d.Dial(url, identity(testKey(2)))
	if err == nil {
		ws.Close()
		t.Fatalf("upgrade succeeded, want %s", reason)
	}
	if resp == nil || resp.StatusCode != reason.HTTPStatus() || resp.Header.Get(contract.HeaderDenyReason) != string(reason) {
		t.Fatalf("got %v, want %d %s", resp, reason.HTTPStatus(), reason)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		t.Fatal("upgraded")
	}
}

// TestNoGoroutineOutlivesItsSession ends sessions every way (replaced,
// forbidden frame, register timeout, client gone) and checks that the
// goroutines they started are all gone while the bridge still runs. In a
// synctest bubble, so the register timeout ends only the silent session:
// on a slow machine a short wall-clock deadline could also end one that
// was about to register.
func TestNoGoroutineOutlivesItsSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startBubble(t, func(o *Options) { o.RegisterTimeout = 100 * time.Millisecond })
		noSessions := func() bool {
			synctest.Wait()
			return promtest.ToFloat64(b.srv.metrics.sessionsActive) == 0
		}
		warm, _ := b.register(t, testKey(9)) // the bridge is serving now
		warm.Close()
		if !noSessions() {
			t.Fatal("warm-up session still active after its client closed")
		}
		before := goleak.IgnoreCurrent()
		k := testKey(1)

		old, _ := b.register(t, k)
		// A pipe holds no bytes: the old client must be reading when the
		// bridge writes its close frame (a socket buffer takes it on TCP).
		oldEnd := make(chan error, 1)
		go func() {
			_, _, err := old.ReadMessage()
			oldEnd <- err
		}()
		replacement, _ := b.register(t, k) // the bridge closes the older session
		var ce *websocket.CloseError
		if err := <-oldEnd; !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || ce.Text != string(contract.CloseSessionReplaced) {
			t.Fatalf("replaced session: %v, want close 1008 %s", err, contract.CloseSessionReplaced)
		}
		send(t, replacement, relayproto.AppendFrame(nil, relayproto.TypeError, nil))
		expectClose(t, replacement, websocket.ClosePolicyViolation, contract.CloseFrameForbidden)
		silent := b.dial(t, k)
		b.relay.next(t) // its relay end, never written to
		expectClose(t, silent, websocket.ClosePolicyViolation, contract.CloseRegisterTimeout)
		gone, _ := b.register(t, testKey(2))
		gone.Close()

		if !noSessions() {
			t.Fatal("sessions still active after every client was closed")
		}
		goleak.VerifyNone(t, before)
		for _, r := range []contract.Reason{contract.CloseSessionReplaced, contract.CloseFrameForbidden, contract.CloseRegisterTimeout} {
			if n := promtest.ToFloat64(b.srv.metrics.sessions.WithLabelValues(string(r))); n != 1 {
				t.Errorf("sessions_total{result=%s} = %v, want 1", r, n)
			}
		}
	})
}
