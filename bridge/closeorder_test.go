package bridge

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
)

// TestDrainCloseFrameSurvivesReaderDeadline: a drained session's client gets
// the 1001 close frame even when the session's client reader meets a read
// deadline after the session has ended but before the close frame is
// written. The reader must not end the session's connection under the
// close: seen in e2e faults/7_bridge_sigterm_drains behind nginx on a
// loaded machine, where the agent got EOF and no close frame (gorilla:
// 1006 "unexpected EOF").
func TestDrainCloseFrameSurvivesReaderDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startBubble(t, nil)
		ws, _ := b.register(t, testKey(1))
		b.srv.mu.Lock()
		sessions := slices.Collect(maps.Keys(b.srv.sessions))
		b.srv.mu.Unlock()
		if len(sessions) != 1 {
			t.Fatalf("%d sessions, want 1", len(sessions))
		}
		sess := sessions[0]
		// The drain's close waits for the write lock after the session has
		// ended, as it does while the relay reader writes a data frame on
		// a socket, or as if the draining goroutine were descheduled there.
		sess.wlock.mu.Lock()
		drained := make(chan struct{})
		go func() { b.srv.Drain(); close(drained) }()
		synctest.Wait()
		if !sess.ended() {
			t.Fatal("the drain has not ended the session")
		}
		// Now the reader's read deadline passes: on a socket, the idle
		// deadline of park.go (a pipe has none).
		_ = sess.ws.SetReadDeadline(time.Now())
		synctest.Wait()
		sess.wlock.mu.Unlock()

		_ = ws.SetReadDeadline(time.Now().Add(time.Second))
		_, _, err := ws.ReadMessage()
		<-drained
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway || ce.Text != "draining" {
			t.Fatalf("client read: %v; want close 1001 %q", err, contract.CloseDraining)
		}
	})
}

// TestSessionEndLogsUnsentClose: when the close frame cannot be written
// (here the write lock stays held past the close grace), the session end
// line carries close_error besides the decided close_code.
func TestSessionEndLogsUnsentClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startBubble(t, nil)
		b.register(t, testKey(1))
		b.srv.mu.Lock()
		sessions := slices.Collect(maps.Keys(b.srv.sessions))
		b.srv.mu.Unlock()
		sess := sessions[0]
		sess.wlock.mu.Lock()
		drained := make(chan struct{})
		go func() { b.srv.Drain(); close(drained) }()
		synctest.Wait()
		// The bubble's clock: past the latest close a spread drain makes
		// (before its timeout) plus the grace, so the close has given up
		// waiting for the lock.
		time.Sleep(b.srv.cfg.DrainTimeout + b.srv.closeGrace + time.Millisecond)
		sess.wlock.mu.Unlock()
		<-drained
		logs := b.logs.String()
		want := `"close_code":1001,"close_reason":"draining","close_error":"` + errWriteLockTimeout.Error() + `"`
		if !strings.Contains(logs, want) {
			t.Fatalf("logs lack %s:\n%s", want, logs)
		}
	})
}
