package extauthz

import (
	"net/http"
	"strconv"
	"time"

	"github.com/wirekube/relay-ws/extauthz/internal/failurelimit"
	"github.com/wirekube/relay-ws/internal/contract"
)

// clientFailure reports whether d refuses what the client itself sent: a
// request or a credential no agent sends (400, 401). Every other answer (an
// allow, a valid token of an identity not allowed, an unavailable review)
// is never limited.
func clientFailure(d Decision) bool {
	s := d.Status()
	return s == http.StatusBadRequest || s == http.StatusUnauthorized
}

// limitFailures returns d, or source_rate_limited with the whole seconds until the
// address has a token again when d is a client failure and client's bucket
// is empty. The original reason stays in the log line's detail.
func limitFailures(f *failurelimit.Limiter, client string, d Decision, now time.Time) Decision {
	if f == nil || !clientFailure(d) {
		return d
	}
	ok, wait := f.Take(client, now)
	if ok {
		return d
	}
	return Decision{Reason: contract.ReasonSourceRateLimited, Detail: string(d.Reason), RetryAfter: wait}
}

// retryAfter is a deny's Retry-After value: the seconds of a
// source_rate_limited answer, 1 for a retryable one (503), "" otherwise.
func retryAfter(d Decision) string {
	switch {
	case d.RetryAfter > 0:
		return strconv.Itoa(d.RetryAfter)
	case d.Reason.Retryable():
		return "1"
	}
	return ""
}
