package extauthz

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestReviewAfterIdentityShare: an identity with 4 follow-ups waiting gets
// no fifth (result identity_share) while another identity's is queued;
// once one of the first identity's is taken, it may queue one again.
func TestReviewAfterIdentityShare(t *testing.T) {
	q, err := newReviewAfter(100, prometheus.NewRegistry(), time.Now, func(string) {})
	must(t, err)
	of := func(pod string) *followUp {
		c := &tokenClaims{}
		c.Subject = "system:serviceaccount:wirekube-system:wirekube-agent"
		c.Kubernetes.Pod = &ref{pod, "uid-" + pod}
		return &followUp{ver: &verified{claims: c}}
	}
	for i := range 4 {
		if !q.add(of("agent-a"), false) {
			t.Fatalf("follow-up %d of agent-a refused, want queued", i+1)
		}
	}
	if q.add(of("agent-a"), false) {
		t.Fatal("fifth follow-up of agent-a queued, want refused")
	}
	if !q.add(of("agent-b"), false) {
		t.Fatal("agent-b's follow-up refused while agent-a holds its share")
	}
	if n := testutil.ToFloat64(q.results.WithLabelValues(afterIdentityShare)); n != 1 {
		t.Errorf("review_after_total{result=identity_share} = %v, want 1", n)
	}
	if _, ok := q.take(t.Context()); !ok {
		t.Fatal("take found nothing")
	}
	if !q.add(of("agent-a"), false) {
		t.Fatal("agent-a refused after one of its follow-ups was taken")
	}
	if got := q.len(); got != 5 { // 4 of agent-a, 1 of agent-b, one taken, one more of agent-a
		t.Errorf("queue holds %d, want 5", got)
	}
}
