//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
)

// testHarness proves the test cluster is what the scenarios assume: the
// pinned version, the CRD served, real bound tokens with the extra fields
// extauthz reads, RBAC enforced, and a self-signed expired token refused.
func (e *env) testHarness(t *testing.T) {
	ctx := context.Background()
	v, err := e.cluster.Client.Discovery().ServerVersion()
	fatalIf(t, err)
	if v.GitVersion != stack.KubeVersion {
		t.Errorf("kube-apiserver %s, want %s", v.GitVersion, stack.KubeVersion)
	}
	id := e.podAgent(t, "harness-node")
	st := e.review(t, id.token)
	if !st.Authenticated || st.User.Username != "system:serviceaccount:wirekube-system:wirekube-agent" {
		t.Fatalf("pod-bound token: authenticated %v as %q (%s)", st.Authenticated, st.User.Username, st.Error)
	}
	for key, want := range map[string]string{
		"authentication.kubernetes.io/pod-name":  id.pod.Name,
		"authentication.kubernetes.io/pod-uid":   string(id.pod.UID),
		"authentication.kubernetes.io/node-name": "harness-node",
	} {
		if got := st.User.Extra[key]; len(got) != 1 || got[0] != want {
			t.Errorf("extra %s = %v, want [%s]", key, got, want)
		}
	}
	sa, err := e.cluster.Client.CoreV1().ServiceAccounts(stack.Namespace).Get(ctx, agentSA, metav1.GetOptions{})
	fatalIf(t, err)
	expired, err := e.cluster.SignToken(stack.SignedTokenOptions{ServiceAccount: sa, Pod: id.pod,
		Audience: contract.DefaultAudience, IssuedAt: time.Now().Add(-2 * time.Hour), Expiry: time.Now().Add(-time.Hour)})
	fatalIf(t, err)
	if st := e.review(t, e.track(expired)); st.Authenticated {
		t.Errorf("expired self-signed token authenticated")
	}
	valid, err := e.cluster.SignToken(stack.SignedTokenOptions{ServiceAccount: sa, Pod: id.pod,
		Audience: contract.DefaultAudience, IssuedAt: time.Now(), Expiry: time.Now().Add(time.Hour)})
	fatalIf(t, err)
	if st := e.review(t, e.track(valid)); !st.Authenticated {
		t.Errorf("valid self-signed token refused (%s): the signing key is not the cluster's", st.Error)
	}
	// RBAC is on: the agent's token may not list Pods.
	cfg := rest.AnonymousClientConfig(e.cluster.Config)
	cfg.BearerToken = e.tokenFor(t, stack.Namespace, agentSA, stack.TokenOptions{Audience: stack.Issuer})
	cs, err := kubernetes.NewForConfig(cfg)
	fatalIf(t, err)
	if _, err := cs.CoreV1().Pods(stack.Namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("agent token listing pods: %v, want Forbidden (RBAC)", err)
	}
}

func (e *env) review(t *testing.T, token string) authenticationv1.TokenReviewStatus {
	t.Helper()
	tr, err := e.cluster.Client.AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{contract.DefaultAudience}},
	}, metav1.CreateOptions{})
	fatalIf(t, err)
	return tr.Status
}
