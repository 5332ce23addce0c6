package bridge

import (
	"io"
	"strings"
	"sync/atomic"
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

// TestReadyzFullMark: with --max-sessions=200 and --unready-at=2 the mark
// is 4 sessions and /readyz passes again at 2 (one percent of 200 below
// it). Upgrades are still admitted above the mark: only the cap refuses.
func TestReadyzFullMark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startBubble(t, func(o *Options) { o.MaxSessions, o.UnreadyAt = 200, 2 })
		var ws []*websocket.Conn
		steps := []struct {
			sessions int
			want     string
		}{{3, "200 ok"}, {4, "503 full"}, {5, "503 full"}, {3, "503 full"}, {2, "200 ok"}, {3, "200 ok"}, {4, "503 full"}}
		for i, st := range steps {
			for len(ws) < st.sessions {
				c, _ := b.register(t, testKey(byte(60+len(ws))))
				ws = append(ws, c)
			}
			for len(ws) > st.sessions {
				closeSession(ws[len(ws)-1])
				ws = ws[:len(ws)-1]
			}
			if got := b.readyzAnswer(t); got != st.want {
				t.Errorf("step %d, %d sessions: /readyz = %q, want %q", i, st.sessions, got, st.want)
			}
		}
		if got := testutil.ToFloat64(b.srv.metrics.full); got != 1 {
			t.Errorf("wirekube_bridge_full = %v at the mark, want 1", got)
		}
		if !strings.Contains(b.logs.String(), `"msg":"full mark","unready":true,"sessions":4,"unready_at":4,"ready_below":2`) {
			t.Errorf("no log line of the mark reached:\n%s", b.logs.String())
		}
	})
}

// TestReadyzFullMarkWaitsForAnotherReplica: with --drain-peers, a bridge
// at the mark stays ready while the name resolves to no replica but its
// own, and fails /readyz once another one is ready.
func TestReadyzFullMarkWaitsForAnotherReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var other atomic.Bool
		b := startBubble(t, func(o *Options) {
			o.MaxSessions, o.UnreadyAt = 100, 1
			o.DrainPeers, o.ResolvePeers = "replicas.test", fakeReplicas(&other)
		})
		b.srv.ownAddrs = ownAddr10001
		b.register(t, testKey(70))
		if got := b.readyzAnswer(t); got != "200 ok" {
			t.Errorf("at the mark, the only replica: /readyz = %q, want 200 ok", got)
		}
		other.Store(true)
		if got := b.readyzAnswer(t); got != "503 full" {
			t.Errorf("at the mark, another replica ready: /readyz = %q, want 503 full", got)
		}
		other.Store(false)
		if got := b.readyzAnswer(t); got != "200 ok" {
			t.Errorf("at the mark, the other replica gone: /readyz = %q, want 200 ok", got)
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
