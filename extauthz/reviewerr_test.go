package extauthz

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/wirekube/relay-ws/extauthz/internal/tokenreview"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

var tokenReviews = schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}

// refused is the error client-go returns when nothing listens at the API
// address.
func refused() error {
	return &url.Error{Op: "Post", URL: "https://10.0.0.1:6443/apis/authentication.k8s.io/v1/tokenreviews",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}
}

// TestReviewFailuresCountedAndLogged: each failed TokenReview is counted
// under its category and logged with it, the token nowhere in the line.
func TestReviewFailuresCountedAndLogged(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{apierrors.NewTooManyRequests("slow down", 1), tokenreview.FailRateLimited},
		{apierrors.NewForbidden(tokenReviews, "", errors.New("rbac")), tokenreview.FailForbidden},
		{refused(), tokenreview.FailConnRefused},
		{apierrors.NewInternalError(errors.New("boom")), tokenreview.FailServerError},
	} {
		t.Run(tc.want, func(t *testing.T) {
			logs := &testutil.SyncBuffer{}
			e := newEnvLogging(t, logs)
			tok := e.answer(func(string) (authnv1.TokenReviewStatus, error) { return authnv1.TokenReviewStatus{}, tc.err })
			wantReason(t, e.check(t, tok), contract.ReasonReviewUnavailable)
			if n := promtest.ToFloat64(e.authz.reviewer.Failures().WithLabelValues(tc.want)); n != 1 {
				t.Errorf("token_review_failures_total{category=%q} = %v, want 1", tc.want, n)
			}
			line := logLine(t, logs.String(), "tokenreview failed")
			testutil.Contains(t, line, `"category":"`+tc.want+`"`, `"level":"WARN"`)
			if strings.Contains(logs.String(), tok) {
				t.Errorf("the token is in the log:\n%s", logs.String())
			}
		})
	}
}

// ctxReviews is a TokenReview API that fails a call with its context's
// error once that context has ended and the test released it (so the
// caller's own deadline has fired first, as with a slow API).
type ctxReviews struct{ started, release chan struct{} }

func (c ctxReviews) TokenReviews() authnv1client.TokenReviewInterface { return c }

func (c ctxReviews) Create(ctx context.Context, _ *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	c.started <- struct{}{}
	<-ctx.Done()
	<-c.release
	return nil, ctx.Err()
}

// TestCanceledVsDeadline: a caller that hangs up is "canceled" (no outage,
// counted apart); a review that outlives the check deadline is
// review_unavailable and a "timeout" failure.
func TestCanceledVsDeadline(t *testing.T) {
	e := newEnv(t, nil)
	o := testOptions()
	o.CheckTimeout, o.MaxReviewWait = 300*time.Millisecond, 300*time.Millisecond
	cfg, err := o.Complete()
	must(t, err)
	api := ctxReviews{started: make(chan struct{}, 2), release: make(chan struct{})}
	authz, err := NewAuthorizer(cfg, Deps{Reviews: api, Objects: e.in, Registry: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewJSONHandler(suiteLog, nil)), Now: e.clock.Now, Keys: e.disc.fetch})
	must(t, err)
	must(t, authz.keys.Refresh(context.Background(), "periodic"))
	failures := func(cat string) float64 { return promtest.ToFloat64(authz.reviewer.Failures().WithLabelValues(cat)) }

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Decision)
	go func() { done <- authz.Decide(ctx, requestFromCheck(relayCheck(e.answer(static(podBound())), nil))) }()
	<-api.started
	cancel()
	wantReason(t, <-done, contract.ResultCanceled)
	if n := failures(tokenreview.FailCanceled); n != 1 {
		t.Errorf("failures{canceled} = %v, want 1", n)
	}
	if n := promtest.ToFloat64(authz.reviewer.OutageGauge()); n != 0 {
		t.Errorf("review_outage = %v after a client hang-up, want 0", n)
	}
	if n := promtest.ToFloat64(authz.metrics.checks.WithLabelValues("grpc", "deny", "canceled")); n != 1 {
		t.Errorf("checks_total{reason=canceled} = %v, want 1", n)
	}
	// Nobody hangs up: the call outlives --check-timeout.
	wantReason(t, authz.Decide(context.Background(), requestFromCheck(relayCheck(e.answer(static(podBound())), nil))),
		contract.ReasonReviewUnavailable)
	close(api.release)
	// Both calls failed with their deadline: the shared call outlived the
	// caller who hung up (others could have waited on it), then timed out.
	testutil.Eventually(t, "the timed-out calls to be counted", func() bool { return failures(tokenreview.FailTimeout) == 2 })
	if n := failures(tokenreview.FailCanceled); n != 1 {
		t.Errorf("failures{canceled} = %v after a timeout, want still 1", n)
	}
}

// logLine returns the first log line holding msg.
func logLine(t *testing.T, logs, msg string) string {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"msg":"`+msg+`"`) {
			return l
		}
	}
	t.Fatalf("no %q line in:\n%s", msg, logs)
	return ""
}
