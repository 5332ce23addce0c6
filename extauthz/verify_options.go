package extauthz

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

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
}

// AddFlags registers one flag per field on fs, with o's values as defaults.
func (o *VerifyOptions) AddFlags(fs *flag.FlagSet) {
	fs.Var(cli.NewStringList(&o.ServiceAccountIssuers), "service-account-issuer", "accepted token issuer (repeatable; default: the API server's discovered issuer)")
	fs.DurationVar(&o.JWKSRefreshInterval, "jwks-refresh-interval", o.JWKSRefreshInterval, "period of the ServiceAccount signing-key (JWKS) refresh")
	fs.DurationVar(&o.JWKSMinRefreshInterval, "jwks-min-refresh-interval", o.JWKSMinRefreshInterval, "least time between JWKS refreshes caused by an unknown key id")
	fs.StringVar(&o.OnReviewUnavailable, "on-review-unavailable", o.OnReviewUnavailable, "deny, or verify-offline: admit locally verified and bound tokens while TokenReview is unreachable")
	fs.DurationVar(&o.OfflineWindow, "offline-window", o.OfflineWindow, "longest verify-offline admission after TokenReview stopped answering")
	fs.DurationVar(&o.MaxReviewWait, "max-review-wait", o.MaxReviewWait, "longest wait for a TokenReview rate token plus slot before review_throttled")
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
	return errors.Join(errs...)
}
