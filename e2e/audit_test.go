//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

var metaGet = metav1.GetOptions{}

// markerAgent is the User-Agent prefix of the suite's own marker reviews.
const markerAgent = "wirekube-e2e-audit-marker/"

// tokenReviews counts the TokenReviews kube-apiserver has completed, from
// its audit log (metadata level: never a token), leaving out the suite's
// own marker reviews. Before counting it sends a marker review of its own
// and waits until the log holds that review's ResponseComplete event: a
// review caused by an earlier, finished request completed before the
// marker was even sent, so by then its event is in the log too.
func (e *env) tokenReviews(t *testing.T) int {
	t.Helper()
	marker := e.auditMarker(t)
	var n int
	testutil.Eventually(t, "the audit log to record the marker TokenReview", func() bool {
		b, err := os.ReadFile(e.cluster.AuditLog)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		seen := false
		n = 0
		for line := range bytes.Lines(b) {
			if !bytes.Contains(line, []byte(`"resource":"tokenreviews"`)) ||
				!bytes.Contains(line, []byte(`"stage":"ResponseComplete"`)) {
				continue
			}
			switch {
			case bytes.Contains(line, []byte(marker)):
				seen = true
			case !bytes.Contains(line, []byte(markerAgent)):
				n++
			}
		}
		return seen
	})
	return n
}

// auditMarker sends a TokenReview (of a token that is no token) with a
// User-Agent unique to this call, and returns that User-Agent.
func (e *env) auditMarker(t *testing.T) string {
	t.Helper()
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	cfg := rest.CopyConfig(e.cluster.Config)
	cfg.UserAgent = markerAgent + hex.EncodeToString(id)
	client, err := kubernetes.NewForConfig(cfg)
	fatalIf(t, err)
	_, err = client.AuthenticationV1().TokenReviews().Create(context.Background(),
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: "audit-marker"}}, metav1.CreateOptions{})
	fatalIf(t, err)
	return cfg.UserAgent
}

// wantRefusedWithoutReview is wantRefused for a token refused before any
// API call (a ServiceAccount no rule admits): kube-apiserver's audit log
// records no TokenReview for it.
func (e *env) wantRefusedWithoutReview(t *testing.T, o agentOptions, status int, reason contract.Reason) {
	t.Helper()
	before := e.tokenReviews(t)
	wantRefused(t, o, status, reason)
	if n := e.tokenReviews(t) - before; n != 0 {
		t.Errorf("%d TokenReviews for a token no rule admits, want 0", n)
	}
}
