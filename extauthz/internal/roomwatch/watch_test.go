package roomwatch

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wirekube/relay-ws/internal/room"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// answers is a Fetch that hands out its bodies (or errors) in order.
type answers struct {
	mu    sync.Mutex
	items []any // []byte or error
}

func (a *answers) fetch(context.Context) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	next := a.items[0]
	a.items = a.items[1:]
	if err, ok := next.(error); ok {
		return nil, err
	}
	return next.([]byte), nil
}

// TestPollBadBodyKeepsRoom: a read whose body is no room (a negative
// count, not JSON, over room.MaxBody) or that fails is counted and leaves
// the last good room in place.
func TestPollBadBodyKeepsRoom(t *testing.T) {
	a := &answers{items: []any{
		[]byte(`{"sessions":9000,"full_at":8930,"max_sessions":9400,"draining":false}`),
		[]byte(`{"sessions":-1,"full_at":8930,"max_sessions":9400}`),
		[]byte(`<html>`),
		[]byte(`{"sessions":1,"pad":"` + strings.Repeat("x", room.MaxBody) + `"}`),
		errors.New("connection refused"),
	}}
	now := time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC)
	w, err := newWatch(a.fetch, prometheus.NewRegistry(), quiet, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Poll(context.Background()); err != nil {
		t.Fatalf("good body: %v", err)
	}
	for range 4 {
		if err := w.Poll(context.Background()); err == nil {
			t.Fatal("a bad read was accepted")
		}
	}
	if n := testutil.ToFloat64(w.failures); n != 4 {
		t.Fatalf("failures counted %v, want 4", n)
	}
	if r, fresh := w.Room(); r != (room.Room{Sessions: 9000, FullAt: 8930, Max: 9400}) || !fresh {
		t.Fatalf("Room() = %+v, %v; want the first room, fresh", r, fresh)
	}
}

// TestRoomStaleAfterThreeSeconds: no room before the first read; a room
// read at t is fresh at t+3s and stale 1 ns later.
func TestRoomStaleAfterThreeSeconds(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC)
	now := t0
	a := &answers{items: []any{[]byte(`{"sessions":5,"full_at":4,"max_sessions":6}`)}}
	w, err := newWatch(a.fetch, prometheus.NewRegistry(), quiet, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	if _, fresh := w.Room(); fresh {
		t.Fatal("fresh before any read")
	}
	if err := w.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at    time.Duration
		fresh bool
	}{{0, true}, {3 * time.Second, true}, {3*time.Second + 1, false}} {
		now = t0.Add(c.at)
		if _, fresh := w.Room(); fresh != c.fresh {
			t.Fatalf("at +%v: fresh %v, want %v", c.at, fresh, c.fresh)
		}
	}
}

// TestRunReadsEverySecond (synctest): Run reads at once and then every
// second; a read that hangs is cut at 500 ms and counted, and the next
// read still comes at the next second.
func TestRunReadsEverySecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var reads, ends []time.Duration
		fetch := func(ctx context.Context) ([]byte, error) {
			mu.Lock()
			reads = append(reads, time.Since(start))
			n := len(reads)
			mu.Unlock()
			if n == 3 { // the read at 2 s hangs
				<-ctx.Done()
				mu.Lock()
				ends = append(ends, time.Since(start))
				mu.Unlock()
				return nil, ctx.Err()
			}
			return []byte(`{"sessions":1,"full_at":2,"max_sessions":3}`), nil
		}
		w, err := newWatch(fetch, prometheus.NewRegistry(), quiet, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { w.Run(ctx); close(done) }()
		time.Sleep(3500 * time.Millisecond)
		synctest.Wait()
		cancel()
		<-done
		want := []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second}
		if !equalDurations(reads, want) || !equalDurations(ends, []time.Duration{2500 * time.Millisecond}) {
			t.Fatalf("reads at %v (hung read cut at %v), want %v (cut at 2.5s)", reads, ends, want)
		}
		if n := testutil.ToFloat64(w.failures); n != 1 {
			t.Fatalf("failures %v, want 1", n)
		}
	})
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHTTPFetch: New reads the bridge's answer over HTTP; a status other
// than 200 (a redirect included: none is followed) and a body over
// room.MaxBody are failed reads.
func TestHTTPFetch(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/room", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"sessions":97,"full_at":95,"max_sessions":100,"draining":false}`+"\n")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"sessions":1,"pad":"`+strings.Repeat("x", 4*room.MaxBody)+`"}`)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/room", http.StatusFound) })
	mux.HandleFunc("/broken", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusInternalServerError) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, c := range []struct {
		path string
		ok   bool
	}{{"/room", true}, {"/big", false}, {"/moved", false}, {"/broken", false}} {
		w, err := New(srv.URL+c.path, prometheus.NewRegistry(), quiet, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = w.Poll(context.Background())
		r, fresh := w.Room()
		if (err == nil) != c.ok || fresh != c.ok {
			t.Fatalf("%s: error %v, fresh %v; want a good read %v", c.path, err, fresh, c.ok)
		}
		if c.ok && r != (room.Room{Sessions: 97, FullAt: 95, Max: 100}) {
			t.Fatalf("%s: room %+v", c.path, r)
		}
	}
}

// TestBridgeRoomURLFlag: empty or http:// on a loopback address; anything
// else is an error naming the flag.
func TestBridgeRoomURLFlag(t *testing.T) {
	for v, ok := range map[string]bool{
		"":                             true,
		"http://127.0.0.1:9104/room":   true,
		"http://[::1]:9104/room":       true,
		"https://127.0.0.1:9104/room":  false,
		"http://10.0.0.7:9104/room":    false,
		"http://localhost:9104/room":   false,
		"http://u@127.0.0.1:9104/room": false,
		"http://127.0.0.1:9104/room?x": false,
		"127.0.0.1:9104":               false,
	} {
		err := (&Options{BridgeRoomURL: v}).Validate()
		if (err == nil) != ok {
			t.Errorf("%q: error %v, want ok %v", v, err, ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "--bridge-room-url: ") {
			t.Errorf("%q: error %q does not name the flag", v, err)
		}
	}
}
