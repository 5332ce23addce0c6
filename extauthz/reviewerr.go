package extauthz

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TokenReview failure categories: the category label of
// wirekube_extauthz_token_review_failures_total and the category field of
// the "tokenreview failed" log line (docs/extauthz.md#tokenreview-failures).
const (
	reviewFailTimeout      = "timeout"            // the call missed the check deadline
	reviewFailCanceled     = "canceled"           // the caller (proxy or client) hung up first
	reviewFailRateLimited  = "rate_limited"       // 429 from kube-apiserver (API priority and fairness)
	reviewFailForbidden    = "forbidden"          // 403: RBAC lacks create tokenreviews
	reviewFailUnauthorized = "unauthorized"       // 401: extauthz's own credential was refused
	reviewFailConnRefused  = "connection_refused" // nothing listens at the API address
	reviewFailServerError  = "server_error"       // 5xx
	reviewFailOther        = "other"              // any other transport or API error
)

// reviewFailCategories lists every category, for pre-initialising the
// metric (an alert can then rate() a series that exists from the start).
var reviewFailCategories = []string{reviewFailTimeout, reviewFailCanceled, reviewFailRateLimited,
	reviewFailForbidden, reviewFailUnauthorized, reviewFailConnRefused, reviewFailServerError, reviewFailOther}

// reviewFailCategory classifies a TokenReview client error. It reads only
// the error's type and status code, never its text (which could quote the
// request).
func reviewFailCategory(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return reviewFailTimeout
	case errors.Is(err, context.Canceled):
		return reviewFailCanceled
	case errors.Is(err, syscall.ECONNREFUSED):
		return reviewFailConnRefused
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return reviewFailOther
	}
	switch code := int(st.Status().Code); {
	case code == http.StatusTooManyRequests:
		return reviewFailRateLimited
	case code == http.StatusForbidden:
		return reviewFailForbidden
	case code == http.StatusUnauthorized:
		return reviewFailUnauthorized
	case code == http.StatusGatewayTimeout || code == http.StatusRequestTimeout || apierrors.IsTimeout(err):
		return reviewFailTimeout
	case code >= 500:
		return reviewFailServerError
	}
	return reviewFailOther
}

// statusCode is the HTTP status of an API error, 0 for a transport error.
func statusCode(err error) int {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return int(st.Status().Code)
	}
	return 0
}

// reviewFailed counts and logs one failed TokenReview. The line carries the
// category, the status code and the latency: no token, no error text.
func (r *reviewer) reviewFailed(ctx context.Context, err error, elapsed time.Duration) {
	cat := reviewFailCategory(err)
	r.metrics.reviewFailures.WithLabelValues(cat).Inc()
	if r.log != nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "tokenreview failed",
			slog.String("category", cat), slog.Int("status", statusCode(err)), slog.Duration("latency", elapsed))
	}
}

// callerGone counts a check whose caller hung up (context.Canceled) before
// its TokenReview answered: not an API failure and not an outage.
func (r *reviewer) callerGone() {
	r.metrics.reviewFailures.WithLabelValues(reviewFailCanceled).Inc()
}
