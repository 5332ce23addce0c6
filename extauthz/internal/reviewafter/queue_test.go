package reviewafter

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wirekube/relay-ws/internal/revocation"
)

// item is a follow-up of the tests: the identity it counts against.
type item struct{ who string }

func newQueue(t *testing.T, max int) *Queue[item] {
	t.Helper()
	q, err := New(max, prometheus.NewRegistry(), time.Now, func(i item) string { return i.who },
		func(revocation.Binding) {})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestReviewAfterIdentityShare: an identity with 4 follow-ups waiting gets
// no fifth (result identity_share) while another identity's is queued;
// once one of the first identity's is taken, it may queue one again.
func TestReviewAfterIdentityShare(t *testing.T) {
	q := newQueue(t, 100)
	a, b := item{"agent-a"}, item{"agent-b"}
	for i := range 4 {
		if !q.Add(a, false) {
			t.Fatalf("follow-up %d of agent-a refused, want queued", i+1)
		}
	}
	if q.Add(a, false) {
		t.Fatal("fifth follow-up of agent-a queued, want refused")
	}
	if !q.Add(b, false) {
		t.Fatal("agent-b's follow-up refused while agent-a holds its share")
	}
	if n := testutil.ToFloat64(q.results.WithLabelValues("identity_share")); n != 1 {
		t.Errorf("review_after_total{result=identity_share} = %v, want 1", n)
	}
	if _, ok := q.Take(t.Context()); !ok {
		t.Fatal("take found nothing")
	}
	if !q.Add(a, false) {
		t.Fatal("agent-a refused after one of its follow-ups was taken")
	}
	if got := q.Len(); got != 5 { // 4 of agent-a, 1 of agent-b, one taken, one more of agent-a
		t.Errorf("queue holds %d, want 5", got)
	}
}
