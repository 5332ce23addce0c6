package bridge

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// TestDrain: /readyz fails at once, the main listener refuses new
// connections (the Handler answers 503 draining), open sessions get 1001
// spread over the first half of the drain timeout, Run
// returns when they are gone. In a synctest bubble the spacing is exact.
func TestDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const drain = 900 * time.Millisecond
		b := startBubble(t, func(o *Options) { o.DrainTimeout = drain })
		type closed struct {
			at   time.Time
			code int
			text string
		}
		results := make(chan closed, 3)
		for i := range 3 {
			ws, _ := b.register(t, testKey(byte(10*i+1)))
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
		if got := b.status(t, "/readyz"); got != http.StatusOK {
			t.Fatalf("/readyz before drain = %d", got)
		}
		start := time.Now()
		stopped := make(chan struct{})
		go func() { b.stop(); close(stopped) }()
		synctest.Wait() // Drain has marked the bridge draining and closed the first session
		// The main listener is closed at once, so a front retries another
		// bridge; /readyz (on the metrics listener) and an embedder's own
		// mount of Handler answer 503.
		if c, err := b.ln.DialContext(context.Background(), "", ""); err == nil {
			c.Close()
			t.Error("the main listener still accepts while draining")
		}
		if got := b.status(t, "/readyz"); got != http.StatusServiceUnavailable {
			t.Errorf("/readyz while draining = %d, want 503", got)
		}
		expectDenyHandler(t, b.srv, contract.ReasonDraining)
		var at []time.Duration
		for range 3 {
			c := <-results
			if c.code != websocket.CloseGoingAway || c.text != string(contract.CloseDraining) {
				t.Fatalf("close = %d %q, want 1001 draining", c.code, c.text)
			}
			at = append(at, c.at.Sub(start))
		}
		if want := []time.Duration{0, drain / 4, drain / 2}; !slices.Equal(at, want) {
			t.Errorf("sessions closed at %v after the drain began, want %v (spread over half the timeout)", at, want)
		}
		<-stopped
		if d := time.Since(start); d != drain/2 {
			t.Errorf("Run returned %s after the drain began, want %s (when the last session is gone)", d, drain/2)
		}
	})
}

// TestDrainTimeoutCutsSessions: a client that never answers the close is
// cut when the drain timeout passes, and Run returns then.
func TestDrainTimeoutCutsSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const drain = 150 * time.Millisecond
		b := startBubble(t, func(o *Options) { o.DrainTimeout = drain })
		b.srv.closeGrace = time.Minute // the session would wait for the close answer
		ws, _ := b.register(t, testKey(1))
		// The client takes the close frame off the wire (as a socket buffer
		// would) and never answers it.
		go func() { _, _ = io.Copy(io.Discard, ws.NetConn()) }()
		start := time.Now()
		b.stop()
		if d := time.Since(start); d != drain {
			t.Fatalf("Run returned after %s, want the drain timeout %s", d, drain)
		}
	})
}

func TestHealthzReadyzAndMetricsEndpoints(t *testing.T) {
	h := startBridge(t, nil)
	down := startBridge(t, func(o *Options) { o.RelayAddr = testutil.ClosedAddr(t) })
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

// TestDrainStep: the pause between two closes of a drain is 1/--drain-rate
// when it is set, else the first half of --drain-timeout spread over the
// sessions.
func TestDrainStep(t *testing.T) {
	for _, c := range []struct {
		name    string
		n       int
		timeout time.Duration
		rate    float64
		want    time.Duration
	}{
		{"one session", 1, 30 * time.Second, 0, 0},
		{"no rate: half the timeout spread", 301, 30 * time.Second, 0, 50 * time.Millisecond},
		{"rate slower than the spread", 301, 30 * time.Second, 10, 100 * time.Millisecond},
		{"rate faster than the spread", 301, 30 * time.Second, 200, 5 * time.Millisecond},
		{"one session, rate", 1, 30 * time.Second, 4, 250 * time.Millisecond},
	} {
		if got := drainStep(c.n, c.timeout/2, c.rate); got != c.want {
			t.Errorf("%s: step %s, want %s", c.name, got, c.want)
		}
	}
}
