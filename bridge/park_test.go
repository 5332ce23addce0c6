package bridge

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
)

// onlySession returns the bridge's one open session.
func onlySession(t *testing.T, srv *Server) *session {
	t.Helper()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.sessions) != 1 {
		t.Fatalf("%d sessions, want 1", len(srv.sessions))
	}
	for s := range srv.sessions {
		return s
	}
	return nil
}

// waitParked waits until both readers of s have given their goroutine up
// to the poller, and checks that the session then holds no pooled buffer
// and no plain-read array (rawread.go), and that no goroutine runs either
// reader.
func waitParked(t *testing.T, s *session) {
	t.Helper()
	for limit := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		parked := s.relayParked && s.clientParked
		held := parked && (s.raw.b != nil || s.out.b != nil) // no reader runs when both are parked
		small := parked && (s.fromClient.small != nil || s.fromRelay.small != nil)
		s.mu.Unlock()
		if parked {
			if held {
				t.Error("a parked session holds a pooled buffer")
			}
			if small {
				t.Error("a session over sockets holds a plain-read array")
			}
			if n := readerGoroutines(); n != 0 {
				t.Errorf("%d goroutines run a reader of the parked session", n)
			}
			return
		}
		if time.Now().After(limit) {
			t.Fatalf("the idle session's readers never parked (relay %v, client %v)", s.relayParked, s.clientParked)
		}
	}
}

// readerGoroutines counts the goroutines in either session reader.
func readerGoroutines() int {
	buf := make([]byte, 1<<20)
	st := string(buf[:runtime.Stack(buf, true)])
	return strings.Count(st, "bridge.(*session).clientToRelay(") + strings.Count(st, "bridge.(*session).copyRelay(")
}

// TestIdleSessionParks: an idle registered session gives both reader
// goroutines up (park.go), carries Data both ways again from the parked
// state, parks again, and a drain still closes it with 1001 draining (end
// wakes the parked client reader to linger, and releases the relay
// direction).
func TestIdleSessionParks(t *testing.T) {
	k := testKey(1)
	h := startBridge(t, func(o *Options) { o.PingInterval = time.Hour })
	ws := h.register(t, k)
	fs := &frameStream{t: t, ws: ws}
	echo(t, ws, fs, k, 1) // both readers have worked
	s := onlySession(t, h.srv)
	waitParked(t, s)
	echo(t, ws, fs, k, 2)
	echo(t, ws, fs, k, 3)
	waitParked(t, s)
	go h.srv.Drain()
	expectClose(t, ws, websocket.CloseGoingAway, contract.CloseDraining)
	h.stop()
}

// TestParkedSilentClientTimesOut: a registered client that goes silent
// (it does not even answer pings) while its reader is parked is still
// closed for ping_timeout: the pinger wakes the reader at the silence
// deadline.
func TestParkedSilentClientTimesOut(t *testing.T) {
	k := testKey(1)
	// 3.25 intervals of silence (1.3 s) are longer than idleAfter, so the
	// reader parks before the deadline.
	h := startBridge(t, func(o *Options) { o.PingInterval = 400 * time.Millisecond })
	_ = h.register(t, k) // never read: pings stay unanswered
	s := onlySession(t, h.srv)
	for limit := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		parked, ended := s.clientParked, s.result != nil
		s.mu.Unlock()
		if parked {
			break
		}
		if ended || time.Now().After(limit) {
			t.Fatalf("the client reader never parked (ended %v)", ended)
		}
	}
	for limit := time.Now().Add(30 * time.Second); !strings.Contains(h.logs.String(), `"close_reason":"ping_timeout"`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(limit) {
			t.Fatalf("the parked silent client was not closed for ping_timeout; logs:\n%s", h.logs.String())
		}
	}
}
