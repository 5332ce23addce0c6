package bridge

import (
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// readyzAnswer is /readyz's status and body.
func (b *bubble) readyzAnswer(t *testing.T) string {
	t.Helper()
	resp, err := b.http.Get("http://bridge/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.Status[:3] + " " + strings.TrimSpace(string(body))
}

// closeSession ends one client session and lets the bridge release its
// slot (the fake clock runs past the 0.5 s close grace, and stays within
// the 5 s in which the last relay dial keeps the bridge ready without a
// probe dial, which register would take for a session's).
func closeSession(ws *websocket.Conn) {
	ws.Close()
	time.Sleep(time.Second)
	synctest.Wait()
}

// TestFullMarkLeavesReadyzAlone: with --max-sessions=200 and
// --unready-at=2 the mark is 4 sessions and it clears at 2 (one percent of
// 200 below it). wirekube_bridge_full follows the mark; /readyz stays 200 at
// every step, since a full bridge is healthy.
func TestFullMarkLeavesReadyzAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startBubble(t, func(o *Options) { o.MaxSessions, o.UnreadyAt = 200, 2 })
		var ws []*websocket.Conn
		steps := []struct {
			sessions int
			full     float64
		}{{3, 0}, {4, 1}, {5, 1}, {3, 1}, {2, 0}, {3, 0}, {4, 1}}
		for i, st := range steps {
			for len(ws) < st.sessions {
				c, _ := b.register(t, testKey(byte(60+len(ws))))
				ws = append(ws, c)
			}
			for len(ws) > st.sessions {
				closeSession(ws[len(ws)-1])
				ws = ws[:len(ws)-1]
			}
			if got := b.readyzAnswer(t); got != "200 ok" {
				t.Errorf("step %d, %d sessions: /readyz = %q, want 200 ok", i, st.sessions, got)
			}
			if got := testutil.ToFloat64(b.srv.metrics.full); got != st.full {
				t.Errorf("step %d, %d sessions: wirekube_bridge_full = %v, want %v", i, st.sessions, got, st.full)
			}
		}
		if !strings.Contains(b.logs.String(), `"msg":"full mark","full":true,"sessions":4,"full_at":4,"clear_below":2`) {
			t.Errorf("no log line of the mark reached:\n%s", b.logs.String())
		}
	})
}

// TestReadyzFullMarkOff: --unready-at=0 (the default) never fails /readyz
// below the cap, even with every slot taken.
func TestReadyzFullMarkOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startBubble(t, func(o *Options) { o.MaxSessions = 2 })
		b.register(t, testKey(80))
		b.register(t, testKey(81))
		if got := b.readyzAnswer(t); got != "200 ok" {
			t.Errorf("at the cap with --unready-at=0: /readyz = %q, want 200 ok", got)
		}
	})
}
