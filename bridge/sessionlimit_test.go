package bridge

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
)

// listingServer is a Server with --debug-sessions and n sessions in its
// table and the listing's index, not serving.
func listingServer(t *testing.T, n int) *Server {
	t.Helper()
	o := testOptions("127.0.0.1:1")
	o.DebugSessions = true
	srv, err := newFromOptions(o, nil, prometheus.NewRegistry())
	must(t, err)
	for i := range n {
		sess := &session{seq: uint64(i + 1), start: time.Now()}
		sess.id.Peer = fmt.Sprintf("node-%d", i)
		srv.sessions[sess] = struct{}{}
		srv.listing.add(sess)
	}
	return srv
}

// list calls the listing handler once and returns the status and the deny
// reason header.
func list(srv *Server) (int, string, string) {
	rec := httptest.NewRecorder()
	srv.handleSessions(rec, httptest.NewRequest(http.MethodGet, "/debug/sessions", nil))
	return rec.Code, rec.Header().Get(contract.HeaderDenyReason), rec.Header().Get("Retry-After")
}

// TestSessionListingOneAtATime: while a listing is written to a client
// that stopped reading, another listing is refused 429
// sessions_list_busy with Retry-After: 1; once the first ends, the next
// one is served.
func TestSessionListingOneAtATime(t *testing.T) {
	srv := listingServer(t, 3)
	w := &blockedWriter{h: http.Header{}, writing: make(chan struct{}), released: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.handleSessions(w, httptestRequest(t, "/debug/sessions"))
	}()
	<-w.writing
	code, reason, retry := list(srv)
	close(w.released)
	<-served
	if code != http.StatusTooManyRequests || reason != "sessions_list_busy" || retry != "1" {
		t.Errorf("a second listing during the first: %d %q Retry-After %q, want 429 sessions_list_busy 1", code, reason, retry)
	}
	if code, reason, _ := list(srv); code != http.StatusOK {
		t.Errorf("a listing after the first ended: %d %q, want 200", code, reason)
	}
}

// TestSessionListingRate: 30 listings at once are served, the 31st is
// refused 429 sessions_list_rate; 100 ms later one more is served (10 a
// second), and the next is refused again.
func TestSessionListingRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := listingServer(t, 3)
		for i := range 30 {
			if code, reason, _ := list(srv); code != http.StatusOK {
				t.Fatalf("listing %d of the burst: %d %q, want 200", i+1, code, reason)
			}
		}
		if code, reason, retry := list(srv); code != http.StatusTooManyRequests || reason != "sessions_list_rate" || retry != "1" {
			t.Fatalf("listing 31 at once: %d %q Retry-After %q, want 429 sessions_list_rate 1", code, reason, retry)
		}
		time.Sleep(100 * time.Millisecond)
		if code, reason, _ := list(srv); code != http.StatusOK {
			t.Fatalf("a listing 100ms later: %d %q, want 200", code, reason)
		}
		if code, reason, _ := list(srv); code != http.StatusTooManyRequests || reason != "sessions_list_rate" {
			t.Fatalf("the next at once: %d %q, want 429 sessions_list_rate", code, reason)
		}
	})
}

// TestSessionListingTakesNoSessionTableLock: with the session-table lock
// (s.mu, which every upgrade and session end takes) held, a listing is
// still served in full. The wait only keeps a regression from hanging the
// test.
func TestSessionListingTakesNoSessionTableLock(t *testing.T) {
	srv := listingServer(t, 5)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	done := make(chan contract.SessionList, 1)
	go func() { done <- srv.listSessions(listQuery{limit: contract.SessionsLimitMax}) }()
	select {
	case l := <-done:
		if l.Live != 5 || len(l.Sessions) != 5 {
			t.Errorf("listing with the table locked: live %d, %d sessions; want 5, 5", l.Live, len(l.Sessions))
		}
	case <-time.After(time.Minute):
		t.Fatal("the listing waits for the session-table lock")
	}
}

// TestSessionListingBucketCappedAtBurst: after the burst is spent and ten
// seconds pass (a hundred listings' worth at 10 a second), the bucket
// holds its burst of 30 again, no more: 30 listings at once are served,
// the 31st is refused 429 sessions_list_rate.
func TestSessionListingBucketCappedAtBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := listingServer(t, 3)
		for range 30 {
			list(srv)
		}
		time.Sleep(10 * time.Second)
		for i := range 30 {
			if code, reason, _ := list(srv); code != http.StatusOK {
				t.Fatalf("listing %d after the refill: %d %q, want 200", i+1, code, reason)
			}
		}
		if code, reason, _ := list(srv); code != http.StatusTooManyRequests || reason != "sessions_list_rate" {
			t.Fatalf("listing 31 after a 10 s refill: %d %q, want 429 sessions_list_rate (the bucket holds 30 at most)", code, reason)
		}
	})
}
