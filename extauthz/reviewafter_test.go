package extauthz

import (
	"context"
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	authnv1 "k8s.io/api/authentication/v1"

	"github.com/wirekube/relay-ws/extauthz/internal/reviewafter"
	"github.com/wirekube/relay-ws/internal/contract"
)

// throttledEnv is an env whose review gate has one rate token and no
// other for 1,000 s: the first check takes it, every later one is
// throttled.
func throttledEnv(t *testing.T, mode string, maxPending int) *env {
	e := newEnv(t, func(o *Options) {
		o.KubeAPIQPS, o.KubeAPIBurst = 0.001, 1
		o.OnReviewThrottled, o.ReviewAfterMaxPending = mode, maxPending
	})
	wantReason(t, e.check(t, e.answerToken(agentSpec(e).sign(), static(podBound()))), "") // takes the only rate token
	return e
}

// TestOnReviewThrottled: a relay upgrade the review gate cannot serve is
// refused review_throttled under deny; under review-after it is admitted
// when its claims verify and the informers hold its Pod, Node and
// WireKubePeer, and owes one follow-up review; the local checks still
// refuse what they refuse, and a full follow-up queue answers
// review_throttled.
func TestOnReviewThrottled(t *testing.T) {
	podGone := func(e *env) tokenSpec { s := agentSpec(e); s.pod = &ref{"agent-ghost", "uid-ghost"}; return s }
	secret := func(e *env) tokenSpec { s := agentSpec(e); s.secret = &ref{"s", "uid-s"}; return s }
	for _, tc := range []struct {
		name       string
		mode       string
		spec       func(*env) tokenSpec
		maxPending int
		want       contract.Reason
		owed       int
	}{
		{name: "deny", mode: ThrottledDeny, spec: agentSpec, maxPending: 10, want: contract.ReasonReviewThrottled},
		{name: "review-after: bound agent admitted", mode: ThrottledReviewAfter, spec: agentSpec, maxPending: 10, owed: 1},
		{name: "review-after: its Pod gone", mode: ThrottledReviewAfter, spec: podGone, maxPending: 10, want: contract.ReasonPodNotFound},
		{name: "review-after: secret-bound", mode: ThrottledReviewAfter, spec: secret, maxPending: 10, want: contract.ReasonTokenSecretBound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := throttledEnv(t, tc.mode, tc.maxPending)
			d := e.check(t, e.answerToken(tc.spec(e).sign(), static(podBound())))
			wantReason(t, d, tc.want)
			if e.authz.after != nil && e.authz.after.Len() != tc.owed {
				t.Errorf("follow-ups owed %d, want %d", e.authz.after.Len(), tc.owed)
			}
			if d.ReviewOwed != (tc.owed == 1) {
				t.Errorf("ReviewOwed = %v, want %v (the check line says review_owed)", d.ReviewOwed, tc.owed == 1)
			}
		})
	}
	t.Run("review-after: follow-up queue full", func(t *testing.T) {
		e := throttledEnv(t, ThrottledReviewAfter, 1)
		wantReason(t, e.check(t, e.answerToken(agentSpec(e).sign(), static(podBound()))), "")
		e.clock.Advance(time.Second) // another token of the same Pod
		wantReason(t, e.check(t, e.answerToken(agentSpec(e).sign(), static(podBound()))), contract.ReasonReviewThrottled)
		if n := testutil.ToFloat64(e.authz.after.Results().WithLabelValues(reviewafter.QueueFull)); n != 1 {
			t.Errorf("review_after_total{result=queue_full} = %v, want 1", n)
		}
	})
}

// TestFollowUpReviewRevokes: the follow-up review of an admission under
// review-after keeps the binding when kube-apiserver agrees, and revokes
// it (token_invalid on re-judging) when it refuses the token, names
// another Pod, or cannot be reached.
func TestFollowUpReviewRevokes(t *testing.T) {
	otherPod := saStatus("wirekube-system", "wirekube-agent", agentSAUID,
		map[string]string{"pod-name": "agent-a", "pod-uid": "uid-pod-other", "node-name": "node-a"})
	for _, tc := range []struct {
		name   string
		api    reviewFunc
		result string
		want   contract.Reason
	}{
		{"agrees", static(podBound()), reviewafter.Confirmed, ""},
		{"refuses the token", static(authnv1.TokenReviewStatus{Error: "token has been invalidated"}), reviewafter.Refused, contract.ReasonTokenInvalid},
		{"names another Pod", static(otherPod), reviewafter.Refused, contract.ReasonTokenInvalid},
		{"unreachable", down, reviewafter.Error, contract.ReasonTokenInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := throttledEnv(t, ThrottledReviewAfter, 10)
			d := e.check(t, e.answerToken(agentSpec(e).sign(), tc.api))
			wantReason(t, d, "")
			if r := e.authz.Rejudge(d.binding); r != "" {
				t.Fatalf("re-judged before the follow-up: %q, want it standing", r)
			}
			st := revocationhub.NewStream() // a bridge's stream: told to re-judge when the follow-up revokes
			if added, _ := st.Add(1, d.binding, 10); !added || !e.live.Join(st, 1) {
				t.Fatal("the admitted binding not on a stream")
			}
			e.authz.reviewer.Gate().SetRate(1e6) // the follow-up's turn comes
			f, ok := e.authz.after.Take(context.Background())
			if !ok {
				t.Fatal("no follow-up owed")
			}
			e.authz.after.FollowUp(context.Background(), f)
			if got := e.authz.Rejudge(d.binding); got != tc.want {
				t.Errorf("re-judged after the follow-up: %q, want %q", got, tc.want)
			}
			if n := testutil.ToFloat64(e.authz.after.Results().WithLabelValues(tc.result)); n != 1 {
				t.Errorf("review_after_total{result=%s} = %v, want 1", tc.result, n)
			}
			_, notified := st.Take()
			if revoked := len(notified) > 0; revoked != (tc.want != "") {
				t.Errorf("streams told to re-judge: %v, want %v", notified, tc.want != "")
			}
			if f.HoldsToken() {
				t.Error("the follow-up still holds the token after its review")
			}
			if e.reviews.Load() != 2 {
				t.Errorf("TokenReviews made %d, want 2 (the first check's, the follow-up's)", e.reviews.Load())
			}
		})
	}
}
