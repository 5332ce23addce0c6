package extauthz

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// promSpec is a token of the fixtures' allowlisted monitoring/prometheus.
func promSpec(e *env) tokenSpec {
	return tokenSpec{aud: []string{contract.DefaultAudience}, exp: e.clock.Now().Add(time.Hour),
		ns: "monitoring", sa: "prometheus", saUID: "uid-sa-prom"}
}

// answerAgent registers f for a new agent token bound to Pod agent-<i>:
// agents i != j are distinct identities of the review gate.
func (e *env) answerAgent(i int, f reviewFunc) string {
	s := agentSpec(e)
	s.pod = &ref{fmt.Sprintf("agent-%d", i), fmt.Sprintf("uid-agent-%d", i)}
	return e.answerToken(s.sign(), f)
}

// specOf is a signed token of ServiceAccount ns/name with subject sub
// (empty: the ServiceAccount's own username).
func specOf(e *env, ns, name, sub string) tokenSpec {
	return tokenSpec{aud: []string{contract.DefaultAudience}, exp: e.clock.Now().Add(time.Hour),
		ns: ns, sa: name, saUID: "uid-" + name, subject: sub}
}

// TestStrangerRefusedBeforeReview: a validly signed token of a
// ServiceAccount no rule of the path admits is refused identity_not_allowed
// without a TokenReview; a token some rule could admit is reviewed. The
// fake API would authenticate every one of them.
func TestStrangerRefusedBeforeReview(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		spec    func(*env) tokenSpec
		refused bool // before the review
	}{
		{"stranger on the relay path", "/relay", func(e *env) tokenSpec { return specOf(e, "default", "stranger", "") }, true},
		{"agent name in another namespace", "/relay", func(e *env) tokenSpec { return specOf(e, "default", "wirekube-agent", "") }, true},
		{"peer prefix in another namespace", "/relay", func(e *env) tokenSpec { return specOf(e, "default", "wirekube-relay-peer-node-b", "") }, true},
		{"peer prefix without a peer name", "/relay", func(e *env) tokenSpec { return specOf(e, "wirekube-system", "wirekube-relay-peer-", "") }, true},
		{"allowlisted for /metrics, on the relay path", "/relay", promSpec, true},
		{"agent on an authn-only path", "/metrics", agentSpec, true},
		{"subject not a ServiceAccount", "/relay", func(e *env) tokenSpec { return specOf(e, "default", "stranger", "admin") }, true},
		{"agent", "/relay", agentSpec, false},
		{"per-peer ServiceAccount", "/relay", func(e *env) tokenSpec { return specOf(e, "wirekube-system", "wirekube-relay-peer-node-b", "") }, false},
		{"allowlisted on its path", "/metrics", promSpec, false},
		// kube-apiserver names the user from the kubernetes.io claim; a
		// subject that disagrees must not get an admissible token refused.
		{"stranger subject, agent claim", "/relay", func(e *env) tokenSpec {
			return specOf(e, "wirekube-system", "wirekube-agent", "system:serviceaccount:default:stranger")
		}, false},
		{"agent subject, stranger claim", "/relay", func(e *env) tokenSpec {
			return specOf(e, "default", "stranger", "system:serviceaccount:wirekube-system:wirekube-agent")
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			tok := e.answerToken(tc.spec(e).sign(), static(saStatus("default", "stranger", "uid-sa-stranger", nil)))
			d := e.authz.Decide(context.Background(), requestFromCheck(checkRequest("GET", tc.path, tok, nil)))
			wantReviews := int64(1)
			if tc.refused {
				wantReviews = 0
				if d.Reason != contract.ReasonIdentityNotAllowed || d.Detail != detailSubjectRefused {
					t.Errorf("reason %q detail %q, want %q %q", d.Reason, d.Detail, contract.ReasonIdentityNotAllowed, detailSubjectRefused)
				}
			}
			if got := e.reviews.Load(); got != wantReviews {
				t.Errorf("%d TokenReviews, want %d", got, wantReviews)
			}
		})
	}
}
