package extauthz

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wirekube/relay-ws/internal/contract"
)

func down(string) (authnv1.TokenReviewStatus, error) { return authnv1.TokenReviewStatus{}, errFakeAPI }

func forbidden(string) (authnv1.TokenReviewStatus, error) {
	return authnv1.TokenReviewStatus{}, apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", nil)
}

// agentSpec is a pod-bound agent token of the fixtures, as kube-apiserver
// signs it.
func agentSpec(e *env) tokenSpec {
	return tokenSpec{aud: []string{contract.DefaultAudience}, exp: e.clock.Now().Add(time.Hour),
		pod: &ref{"agent-a", podAUID}, node: &ref{"node-a", nodeAUID}}
}

func TestOnReviewUnavailable(t *testing.T) {
	podGone := func(e *env) tokenSpec { s := agentSpec(e); s.pod = &ref{"agent-ghost", "uid-ghost"}; return s }
	secret := func(e *env) tokenSpec { s := agentSpec(e); s.secret = &ref{"s", "uid-s"}; return s }
	peer := func(e *env) tokenSpec {
		return tokenSpec{aud: []string{contract.DefaultAudience}, exp: e.clock.Now().Add(time.Hour),
			ns: "wirekube-system", sa: "wirekube-relay-peer-node-b", saUID: "uid-sa-peer-b"}
	}
	peerPod := func(e *env) tokenSpec {
		s := peer(e)
		s.pod, s.node = &ref{"peer-b-pod", "uid-pod-peer-b"}, &ref{"node-a", nodeAUID}
		return s
	}
	peerPodGone := func(e *env) tokenSpec { s := peerPod(e); s.pod = &ref{"peer-b-ghost", "uid-ghost"}; return s }
	orphan := func(e *env) tokenSpec {
		s := agentSpec(e)
		s.pod, s.node = &ref{"agent-orphan", "uid-pod-orphan"}, &ref{"node-gone", "uid-node-gone"}
		return s
	}
	tests := []struct {
		name    string
		mode    string
		spec    func(*env) tokenSpec
		api     reviewFunc
		advance time.Duration // between the first failure and the check
		want    contract.Reason
		offline bool
	}{
		{name: "deny: API down", mode: UnavailableDeny, spec: agentSpec, api: down, want: contract.ReasonReviewUnavailable},
		{name: "offline: API down, pod-bound agent", mode: UnavailableVerifyOffline, spec: agentSpec, api: down, offline: true},
		{name: "offline: API down, peer ServiceAccount", mode: UnavailableVerifyOffline, spec: peer, api: down, offline: true},
		{name: "offline: bound pod gone from the informer", mode: UnavailableVerifyOffline, spec: podGone, api: down,
			want: contract.ReasonPodNotFound, offline: true},
		{name: "offline: peer ServiceAccount, pod-bound", mode: UnavailableVerifyOffline, spec: peerPod, api: down, offline: true},
		{name: "offline: peer ServiceAccount, bound pod gone", mode: UnavailableVerifyOffline, spec: peerPodGone, api: down,
			want: contract.ReasonPodNotFound, offline: true},
		{name: "offline: pod-bound agent, its node gone", mode: UnavailableVerifyOffline, spec: orphan, api: down,
			want: contract.ReasonNodeMismatch, offline: true},
		{name: "offline: secret-bound token refused first", mode: UnavailableVerifyOffline, spec: secret, api: down,
			want: contract.ReasonTokenSecretBound},
		{name: "offline: window over", mode: UnavailableVerifyOffline, spec: agentSpec, api: down, advance: 6 * time.Minute,
			want: contract.ReasonReviewUnavailable},
		{name: "offline: inside the window", mode: UnavailableVerifyOffline, spec: agentSpec, api: down, advance: 4 * time.Minute,
			offline: true},
		{name: "offline: API reachable but refusing", mode: UnavailableVerifyOffline, spec: agentSpec, api: forbidden,
			want: contract.ReasonReviewUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.OnReviewUnavailable = tc.mode })
			// The outage starts with a first failed review.
			e.check(t, e.answerToken(agentSpec(e).sign(), tc.api))
			e.clock.Advance(tc.advance)
			tok := e.answerToken(tc.spec(e).sign(), tc.api)
			d := e.check(t, tok)
			wantReason(t, d, tc.want)
			if d.Offline != tc.offline {
				t.Errorf("Offline = %v, want %v", d.Offline, tc.offline)
			}
			result := "allow"
			if tc.want != "" {
				result = "deny"
			}
			if tc.offline && testutil.ToFloat64(e.authz.metrics.offlineChecks.WithLabelValues(result)) < 1 {
				t.Errorf("offline_checks_total{result=%s} not counted", result)
			}
		})
	}
}

// TestOfflineWhenThrottledDuringOutage: during an outage a check the review
// gate throttles is decided offline too, instead of waiting for its turn to
// fail; without an outage it stays review_throttled.
func TestOfflineWhenThrottledDuringOutage(t *testing.T) {
	for _, apiDown := range []bool{false, true} {
		e := newEnv(t, func(o *Options) {
			o.OnReviewUnavailable, o.KubeAPIQPS, o.KubeAPIBurst = UnavailableVerifyOffline, 0.001, 1
		})
		api := reviewFunc(down)
		if !apiDown {
			api = static(podBound())
		}
		e.check(t, e.answerToken(agentSpec(e).sign(), api)) // takes the only rate token
		d := e.check(t, e.answerToken(agentSpec(e).sign(), api))
		want := contract.ReasonReviewThrottled
		if apiDown {
			want = ""
		}
		wantReason(t, d, want)
		if d.Offline != apiDown {
			t.Errorf("api down %v: Offline = %v", apiDown, d.Offline)
		}
	}
}
