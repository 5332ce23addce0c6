package bridge

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/testutil"
)

func getStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestDrain: /readyz fails at once, new upgrades get 503 draining, open
// sessions get 1001 spread over time, Run returns when they are gone.
func TestDrain(t *testing.T) {
	const drain = 900 * time.Millisecond
	h := startBridge(t, func(o *Options) { o.DrainTimeout = drain })
	if got := getStatus(t, h.base+"/readyz"); got != http.StatusOK {
		t.Fatalf("/readyz before drain = %d", got)
	}
	type closed struct {
		at   time.Time
		code int
		text string
	}
	results := make(chan closed, 3)
	for i := range 3 {
		ws := h.register(t, testKey(byte(10*i+1)))
		go func() {
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					var ce *websocket.CloseError
					c := closed{at: time.Now()}
					if errors.As(err, &ce) {
						c.code, c.text = ce.Code, ce.Text
					}
					results <- c
					return
				}
			}
		}()
	}
	start := time.Now()
	stopped := make(chan struct{})
	go func() { h.stop(); close(stopped) }()
	testutil.Eventually(t, "/readyz failing", func() bool { return getStatus(t, h.base+"/readyz") == http.StatusServiceUnavailable })
	expectDeny(t, h.url, contract.ReasonDraining)
	var first, last time.Time
	for i := range 3 {
		c := <-results
		if c.code != websocket.CloseGoingAway || c.text != string(contract.CloseDraining) {
			t.Fatalf("close = %d %q, want 1001 draining", c.code, c.text)
		}
		if i == 0 {
			first = c.at
		}
		last = c.at
	}
	if spread := last.Sub(first); spread < drain/4 {
		t.Errorf("sessions closed within %s, want them spread over about %s", spread, drain/2)
	}
	<-stopped
	if d := time.Since(start); d > drain+time.Second {
		t.Errorf("Run returned after %s", d)
	}
}

// TestDrainTimeoutCutsSessions: a client that never answers the close is
// cut when the drain timeout passes, and Run returns.
func TestDrainTimeoutCutsSessions(t *testing.T) {
	h := startBridge(t, func(o *Options) { o.DrainTimeout = 150 * time.Millisecond })
	h.srv.closeGrace = time.Minute // the session would wait for the close answer
	h.register(t, testKey(1))      // and the client never reads
	start := time.Now()
	h.stop()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Run returned after %s, want about the drain timeout", d)
	}
}

func TestHealthzReadyzAndMetricsEndpoints(t *testing.T) {
	h := startBridge(t, nil)
	down := startBridge(t, func(o *Options) { o.RelayAddr = closedAddr(t) })
	tests := []struct {
		name    string
		handler http.Handler
		path    string
		want    int
		body    string
	}{
		{"main healthz", h.srv.Handler(), "/healthz", 200, "ok"},
		{"main readyz", h.srv.Handler(), "/readyz", 200, "ok"},
		{"admin healthz", h.srv.AdminHandler(), "/healthz", 200, "ok"},
		{"admin readyz", h.srv.AdminHandler(), "/readyz", 200, "ok"},
		{"admin metrics", h.srv.AdminHandler(), "/metrics", 200, "wirekube_bridge_sessions_active"},
		{"main has no metrics", h.srv.Handler(), "/metrics", 404, ""},
		{"relay down healthz", down.srv.Handler(), "/healthz", 200, "ok"},
		{"relay down readyz", down.srv.Handler(), "/readyz", 503, "relay unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			tt.handler.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if w.Code != tt.want || !strings.Contains(w.Body.String(), tt.body) {
				t.Fatalf("%s = %d %q, want %d containing %q", tt.path, w.Code, w.Body, tt.want, tt.body)
			}
		})
	}
}

// TestReadinessProbesAtMostOncePerSecond, whatever the probe rate. It runs
// in a synctest bubble: time.Sleep moves the bubble's clock, and the 50
// callers of each round all reach the probe before time moves on.
func TestReadinessProbesAtMostOncePerSecond(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "relay up", true: "relay down"}[fail], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testReadinessRate(t, fail) })
		})
	}
}

func testReadinessRate(t *testing.T, fail bool) {
	var dials atomic.Int32
	r := &readiness{now: time.Now, fresh: 5 * time.Second, probeInterval: time.Second,
		probe: func(context.Context) error {
			dials.Add(1)
			time.Sleep(10 * time.Millisecond) // concurrent callers pile up
			if fail {
				return errors.New("refused")
			}
			return nil
		}}
	hammer := func() {
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if err := r.check(context.Background()); (err != nil) != fail {
					t.Errorf("check = %v, want failure %v", err, fail)
				}
			})
		}
		wg.Wait()
	}
	// Each probe takes 10 ms of the bubble's time, so the steps below land
	// 0.91 s, 1.11 s, 0.51 s and 5.01 s after the previous probe started.
	wantDials := []int32{1, 1, 2, 2, 3}
	steps := []time.Duration{0, 900 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, 5 * time.Second}
	if !fail { // a success stays fresh for 5 s
		wantDials = []int32{1, 1, 1, 1, 2}
	}
	for i, step := range steps {
		time.Sleep(step)
		hammer()
		if got := dials.Load(); got != wantDials[i] {
			t.Fatalf("after step %d: %d dials, want %d", i, got, wantDials[i])
		}
	}
}

func TestSessionDialCountsAsReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &readiness{now: time.Now, fresh: 5 * time.Second, probeInterval: time.Second,
			probe: func(context.Context) error { t.Error("probe dialed despite a fresh session dial"); return nil }}
		r.markOK()
		time.Sleep(4 * time.Second)
		if err := r.check(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
