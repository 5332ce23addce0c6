package sessionlist

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// listingOf is a listing with n sessions in its index.
func listingOf(n int) *Listing {
	l := New(10*time.Second, testDeny)
	for i := range n {
		l.Add(&testSession{seq: uint64(i + 1), peer: fmt.Sprintf("node-%d", i), start: time.Now()})
	}
	return l
}

// list calls the listing handler once and returns the status and the deny
// reason header.
func list(l *Listing) (int, string, string) {
	rec := httptest.NewRecorder()
	l.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/sessions", nil))
	return rec.Code, rec.Header().Get(contract.HeaderDenyReason), rec.Header().Get("Retry-After")
}

// TestSessionListingOneAtATime: while a listing is written to a client
// that stopped reading, another listing is refused 429
// sessions_list_busy with Retry-After: 1; once the first ends, the next
// one is served.
func TestSessionListingOneAtATime(t *testing.T) {
	l := listingOf(3)
	w := testutil.NewBlockedWriter()
	served := make(chan struct{})
	go func() {
		defer close(served)
		l.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/debug/sessions", nil))
	}()
	<-w.Writing
	code, reason, retry := list(l)
	close(w.Released)
	<-served
	if code != http.StatusTooManyRequests || reason != "sessions_list_busy" || retry != "1" {
		t.Errorf("a second listing during the first: %d %q Retry-After %q, want 429 sessions_list_busy 1", code, reason, retry)
	}
	if code, reason, _ := list(l); code != http.StatusOK {
		t.Errorf("a listing after the first ended: %d %q, want 200", code, reason)
	}
}

// TestSessionListingRate: 30 listings at once are served, the 31st is
// refused 429 sessions_list_rate; 100 ms later one more is served (10 a
// second), and the next is refused again.
func TestSessionListingRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := listingOf(3)
		for i := range 30 {
			if code, reason, _ := list(l); code != http.StatusOK {
				t.Fatalf("listing %d of the burst: %d %q, want 200", i+1, code, reason)
			}
		}
		if code, reason, retry := list(l); code != http.StatusTooManyRequests || reason != "sessions_list_rate" || retry != "1" {
			t.Fatalf("listing 31 at once: %d %q Retry-After %q, want 429 sessions_list_rate 1", code, reason, retry)
		}
		time.Sleep(100 * time.Millisecond)
		if code, reason, _ := list(l); code != http.StatusOK {
			t.Fatalf("a listing 100ms later: %d %q, want 200", code, reason)
		}
		if code, reason, _ := list(l); code != http.StatusTooManyRequests || reason != "sessions_list_rate" {
			t.Fatalf("the next at once: %d %q, want 429 sessions_list_rate", code, reason)
		}
	})
}

// TestSessionListingBucketCappedAtBurst: after the burst is spent and ten
// seconds pass (a hundred listings' worth at 10 a second), the bucket
// holds its burst of 30 again, no more: 30 listings at once are served,
// the 31st is refused 429 sessions_list_rate.
func TestSessionListingBucketCappedAtBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := listingOf(3)
		for range 30 {
			list(l)
		}
		time.Sleep(10 * time.Second)
		for i := range 30 {
			if code, reason, _ := list(l); code != http.StatusOK {
				t.Fatalf("listing %d after the refill: %d %q, want 200", i+1, code, reason)
			}
		}
		if code, reason, _ := list(l); code != http.StatusTooManyRequests || reason != "sessions_list_rate" {
			t.Fatalf("listing 31 after a 10 s refill: %d %q, want 429 sessions_list_rate (the bucket holds 30 at most)", code, reason)
		}
	})
}
