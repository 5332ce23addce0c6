package tokenreview

import (
	"context"
	"errors"
	"net/http"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TokenReview failure categories: the category label of
// wirekube_extauthz_token_review_failures_total and the category field of
// the "tokenreview failed" log line (docs/extauthz.md#tokenreview-failures).
const (
	FailTimeout      = "timeout"            // the call missed the check deadline
	FailCanceled     = "canceled"           // the caller (proxy or client) hung up first
	FailRateLimited  = "rate_limited"       // 429 from kube-apiserver (API priority and fairness)
	FailForbidden    = "forbidden"          // 403: RBAC lacks create tokenreviews
	FailUnauthorized = "unauthorized"       // 401: extauthz's own credential was refused
	FailConnRefused  = "connection_refused" // nothing listens at the API address
	FailServerError  = "server_error"       // 5xx
	FailOther        = "other"              // any other transport or API error
)

// reviewFailCategories lists every category, for pre-initialising the
// metric (an alert can then rate() a series that exists from the start).
var reviewFailCategories = []string{FailTimeout, FailCanceled, FailRateLimited,
	FailForbidden, FailUnauthorized, FailConnRefused, FailServerError, FailOther}

// reviewFailCategory classifies a TokenReview client error. It reads only
// the error's type and status code, never its text (which could quote the
// request).
func reviewFailCategory(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return FailTimeout
	case errors.Is(err, context.Canceled):
		return FailCanceled
	case errors.Is(err, syscall.ECONNREFUSED):
		return FailConnRefused
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return FailOther
	}
	switch code := int(st.Status().Code); {
	case code == http.StatusTooManyRequests:
		return FailRateLimited
	case code == http.StatusForbidden:
		return FailForbidden
	case code == http.StatusUnauthorized:
		return FailUnauthorized
	case code == http.StatusGatewayTimeout || code == http.StatusRequestTimeout || apierrors.IsTimeout(err):
		return FailTimeout
	case code >= 500:
		return FailServerError
	}
	return FailOther
}

// statusCode is the HTTP status of an API error, 0 for a transport error.
func statusCode(err error) int {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return int(st.Status().Code)
	}
	return 0
}
