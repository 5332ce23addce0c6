package extauthz

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/wirekube/relay-ws/extauthz/internal/standin"
	"github.com/wirekube/relay-ws/internal/cli"
)

// VerifyOptions are the settings of local token verification (the JWKS),
// the degraded mode and the review gate.
type VerifyOptions struct {
	// ServiceAccountIssuers are the accepted iss values of a token. Default
	// none: the issuer of the API server's
	// /.well-known/openid-configuration. Set every issuer kube-apiserver
	// accepts while migrating issuers.
	ServiceAccountIssuers []string
	// JWKSRefreshInterval is how often the signing keys are fetched again.
	// Default 5m.
	JWKSRefreshInterval time.Duration
	// JWKSMinRefreshInterval is the least time between two fetches caused
	// by a token with an unknown kid (key rotation). Default 10s; lower lets
	// a storm of made-up kids fetch more often.
	JWKSMinRefreshInterval time.Duration
	// OnReviewUnavailable is deny (default: fail closed) or verify-offline
	// (admit a locally verified, locally bound token while TokenReview
	// cannot be reached, for at most OfflineWindow: revocation only
	// TokenReview sees is missed meanwhile).
	OnReviewUnavailable string
	// OfflineWindow bounds verify-offline: from the first failed
	// TokenReview after the last answer. Default 5m.
	OfflineWindow time.Duration
	// MaxReviewWait is the longest a check waits for a TokenReview rate
	// token plus an in-flight slot; a check that would wait longer is
	// answered review_throttled at once. Default 500ms.
	MaxReviewWait time.Duration
	// OnReviewThrottled is deny (default: a check the review gate cannot
	// serve within MaxReviewWait is answered review_throttled) or
	// review-after (admit a relay upgrade whose token verifies locally and
	// whose Pod, Node and WireKubePeer the informers confirm, and make its
	// TokenReview afterwards, in the gate's turn; the session is revoked,
	// token_invalid, when that review refuses the token, names another
	// identity or cannot be made). Danger: for the time the follow-up
	// waits (at most ReviewAfterMaxPending / --kube-api-qps), a token
	// kube-apiserver would refuse but whose objects still exist is on the
	// relay.
	OnReviewThrottled string
	// ReviewAfterMaxPending bounds the follow-up TokenReviews waiting:
	// beyond it a throttled check is answered review_throttled as with
	// deny. Default 3000 (a minute of the default --kube-api-qps).
	ReviewAfterMaxPending int
}

// What to do when TokenReview cannot be reached (--on-review-unavailable)
// or the review gate cannot serve a check within --max-review-wait
// (--on-review-throttled): extauthz/internal/standin says what each mode
// does.
const (
	UnavailableDeny          = standin.UnavailableDeny
	UnavailableVerifyOffline = standin.UnavailableVerifyOffline
	ThrottledDeny            = standin.ThrottledDeny
	ThrottledReviewAfter     = standin.ThrottledReviewAfter
)

// AddFlags registers one flag per field on fs, with o's values as defaults.
func (o *VerifyOptions) AddFlags(fs *flag.FlagSet) {
	fs.Var(cli.NewStringList(&o.ServiceAccountIssuers), "service-account-issuer", "accepted token issuer (repeatable; default: the API server's discovered issuer)")
	fs.DurationVar(&o.JWKSRefreshInterval, "jwks-refresh-interval", o.JWKSRefreshInterval, "period of the ServiceAccount signing-key (JWKS) refresh")
	fs.DurationVar(&o.JWKSMinRefreshInterval, "jwks-min-refresh-interval", o.JWKSMinRefreshInterval, "least time between JWKS refreshes caused by an unknown key id")
	fs.StringVar(&o.OnReviewUnavailable, "on-review-unavailable", o.OnReviewUnavailable, "deny, or verify-offline: admit locally verified and bound tokens while TokenReview is unreachable")
	fs.DurationVar(&o.OfflineWindow, "offline-window", o.OfflineWindow, "longest verify-offline admission after TokenReview stopped answering")
	fs.DurationVar(&o.MaxReviewWait, "max-review-wait", o.MaxReviewWait, "longest wait for a TokenReview rate token plus slot before review_throttled")
	fs.StringVar(&o.OnReviewThrottled, "on-review-throttled", o.OnReviewThrottled, "deny, or review-after: admit a locally verified, informer-bound relay upgrade and review its token afterwards")
	fs.IntVar(&o.ReviewAfterMaxPending, "review-after-max-pending", o.ReviewAfterMaxPending, "most follow-up TokenReviews waiting under review-after (beyond: review_throttled)")
}

// Validate reports every invalid option (errors.Join), each error naming
// its flag.
func (o *VerifyOptions) Validate() error {
	var errs []error
	check := func(bad bool, format string, args ...any) {
		if bad {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	for _, iss := range o.ServiceAccountIssuers {
		check(iss == "" || strings.ContainsAny(iss, " \t,"), "--service-account-issuer: want one non-empty issuer, got %q", iss)
	}
	check(o.JWKSRefreshInterval < time.Second, "--jwks-refresh-interval: want >= 1s, got %s", o.JWKSRefreshInterval)
	check(o.JWKSMinRefreshInterval <= 0 || o.JWKSMinRefreshInterval > o.JWKSRefreshInterval,
		"--jwks-min-refresh-interval: want > 0 and <= --jwks-refresh-interval, got %s", o.JWKSMinRefreshInterval)
	check(o.MaxReviewWait <= 0, "--max-review-wait: want > 0, got %s", o.MaxReviewWait)
	check(o.OnReviewUnavailable != UnavailableDeny && o.OnReviewUnavailable != UnavailableVerifyOffline,
		"--on-review-unavailable: want %s or %s, got %q", UnavailableDeny, UnavailableVerifyOffline, o.OnReviewUnavailable)
	check(o.OfflineWindow <= 0, "--offline-window: want > 0, got %s", o.OfflineWindow)
	check(o.OnReviewThrottled != ThrottledDeny && o.OnReviewThrottled != ThrottledReviewAfter,
		"--on-review-throttled: want %s or %s, got %q", ThrottledDeny, ThrottledReviewAfter, o.OnReviewThrottled)
	check(o.ReviewAfterMaxPending < 1 || o.ReviewAfterMaxPending > 1_000_000,
		"--review-after-max-pending: want 1..1000000, got %d", o.ReviewAfterMaxPending)
	return errors.Join(errs...)
}
