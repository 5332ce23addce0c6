// Package extauthz is the WireKube relay's external authorization service:
// it validates Kubernetes ServiceAccount tokens with TokenReview (cached,
// single-flighted, bounded), binds the identity to a WireKubePeer and its
// public key, and answers Envoy's gRPC ext_authz Check and plain HTTP
// forward-auth subrequests with the same Decision.
package extauthz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/wirekube/relay-ws/extauthz/internal/binding"
	"github.com/wirekube/relay-ws/extauthz/internal/events"
	"github.com/wirekube/relay-ws/extauthz/internal/failurelimit"
	"github.com/wirekube/relay-ws/extauthz/internal/jwks"
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"github.com/wirekube/relay-ws/extauthz/internal/signkeys"
	"github.com/wirekube/relay-ws/extauthz/internal/standin"
	"github.com/wirekube/relay-ws/extauthz/internal/steering"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenreview"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenverify"
	"github.com/wirekube/relay-ws/internal/identitysig"
)

// Deps are the collaborators of an Authorizer. Reviews, Objects, Registry and
// Logger are required; Now defaults to time.Now.
type Deps struct {
	// Reviews creates TokenReviews (a narrow typed client).
	Reviews authnv1client.TokenReviewsGetter
	// Objects answers Pod, ServiceAccount, Node and WireKubePeer lookups.
	Objects Objects
	// Registry receives the metrics.
	Registry prometheus.Registerer
	// Logger gets one line per decision.
	Logger *slog.Logger
	// Now is the clock used for cache TTLs and token claims.
	Now func() time.Time
	// Keys fetches the ServiceAccount issuer discovery documents from the
	// API server (jwks.RESTFetch). Required: every token's signature is checked
	// against them before a TokenReview is spent on it.
	Keys jwks.FetchFunc
	// Events records Kubernetes Events on WireKubePeers for the refusals
	// and revocations an operator must act on; nil records none.
	Events *events.Recorder
	// Live holds the bindings of the bridges streaming to this process (the
	// revocation hub's streams): which binding holds a key, and where a
	// failed follow-up review marks its objects changed. nil: none known.
	Live *revocationhub.LiveBindings
	// Signer signs relay allows: the configured key, published before the
	// Authorizer is built (signkeys.Publish). nil: a per-start key pair.
	Signer *identitysig.Signer
	// Rooms is the room of the bridge beside this extauthz
	// (--bridge-room-url; internal/steering); nil steers nothing.
	Rooms Rooms
	// Dice draws the bounce, uniform in [0, 1); nil: math/rand/v2.
	Dice func() float64
}

// Rooms is the room of the bridge beside this extauthz
// (extauthz/internal/roomwatch.Watch, --bridge-room-url): ok is false
// while it is unread or stale.
type Rooms = steering.Rooms

// Authorizer makes the allow/deny decision. Safe for concurrent use.
type Authorizer struct {
	cfg      *Config
	reviewer *tokenreview.Reviewer
	// rules are the binding rules over Deps.Objects (internal/binding).
	rules   *binding.Rules
	metrics *metrics
	log     *slog.Logger
	// checkLogs are the check line's handlers of log (checklog.go).
	checkLogs atomic.Pointer[checkLogs]
	keys      *jwks.Set
	verifier  tokenVerifier
	events    peerEvents
	now       func() time.Time
	// holders answers which binding holds a key on the bridges streaming
	// to this process (Deps.Live; keyholder.go). nil: none known.
	holders keyHolders
	// signer signs relay allows (signing.go): Deps.Signer, then each key a
	// reload of the key files installs.
	signer identitySigner
	// failures limits the failed checks of one client address
	// (internal/failurelimit, failurelimit.go); nil: off.
	failures *failurelimit.Limiter
	// after owes and makes the follow-up reviews of
	// --on-review-throttled=review-after (extauthz/internal/standin, its
	// queue extauthz/internal/reviewafter); nil under deny.
	after *standin.After
	// standIns answer when TokenReview cannot (extauthz/internal/standin).
	standIns *standin.StandIns
	// steering turns new sessions away from a full bridge
	// (internal/steering; checks.go:Authorizer.steer). Never nil.
	steering *steering.Steering
}

// NewAuthorizer builds an Authorizer from the completed cfg.
func NewAuthorizer(cfg *Config, d Deps) (*Authorizer, error) {
	if cfg == nil {
		return nil, errors.New("extauthz: nil Config (use Options.Complete)")
	}
	if d.Reviews == nil || d.Objects == nil || d.Registry == nil || d.Logger == nil || d.Keys == nil {
		return nil, errors.New("extauthz: Reviews, Objects, Registry, Logger and Keys are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	m, err := newMetrics(d.Registry)
	if err != nil {
		return nil, fmt.Errorf("extauthz metrics: %w", err)
	}
	if dup, ok := d.Objects.(interface{ DuplicatePeerKeys() int }); ok {
		if err := registerPeerKeyMetrics(d.Registry, dup.DuplicatePeerKeys); err != nil {
			return nil, fmt.Errorf("extauthz metrics: %w", err)
		}
	}
	if h, ok := d.Objects.(interface{ KeyHistorySize() int }); ok {
		if err := registerKeyHistoryMetric(d.Registry, h.KeyHistorySize); err != nil {
			return nil, fmt.Errorf("extauthz metrics: %w", err)
		}
	}
	rv, err := tokenreview.New(tokenreview.Config{Client: d.Reviews, Audience: cfg.audience,
		CacheSize: cfg.cacheSize, TTL: cfg.cacheTTL, NegativeTTL: cfg.negativeCacheTTL,
		QPS: cfg.reviewQPS, Burst: cfg.reviewBurst, MaxInflight: cfg.maxInflight, MaxWait: cfg.maxReviewWait,
		Now: d.Now, Log: d.Logger, Reg: d.Registry})
	if err != nil {
		return nil, err
	}
	ks, err := jwks.New(jwks.Config{Fetch: d.Keys, Issuers: cfg.issuers, Interval: cfg.jwksInterval,
		MinRefresh: cfg.jwksMinRefresh, Now: d.Now, Log: d.Logger, Reg: d.Registry})
	if err != nil {
		return nil, fmt.Errorf("extauthz metrics: %w", err)
	}
	a := &Authorizer{cfg: cfg, reviewer: rv, rules: newRules(cfg, d.Objects), metrics: m, log: d.Logger,
		keys: ks, verifier: tokenverify.New(ks, cfg.audience, d.Now), events: peerEvents{d.Events},
		now: d.Now, failures: failurelimit.New(cfg.failureLimit), steering: steering.New(d.Rooms, d.Dice)}
	notify := func(string) {}
	if d.Live != nil {
		a.holders, notify = d.Live, d.Live.Notify
	}
	if a.after, a.standIns, err = newStandIns(cfg, d, rv, notify); err != nil {
		return nil, fmt.Errorf("extauthz metrics: %w", err)
	}
	if d.Signer == nil {
		kr, _ := signkeys.Load(signkeys.Options{}) // a per-start key pair: cannot fail
		d.Signer = kr.Signer()
	}
	a.signer.cur.Store(d.Signer)
	return a, nil
}

// newStandIns builds what stands in for TokenReview: the follow-ups of
// --on-review-throttled=review-after (nil under deny; a failed one marks
// its binding's objects changed on notify) and the offline review.
func newStandIns(cfg *Config, d Deps, rv *tokenreview.Reviewer, notify func(string)) (*standin.After, *standin.StandIns, error) {
	var after *standin.After
	if cfg.onThrottled == ThrottledReviewAfter {
		var err error
		after, err = standin.NewAfter(standin.AfterConfig{Max: cfg.afterPending, Reg: d.Registry, Now: d.Now,
			Notify: notify, Reviewer: rv, Refuses: refusesFor(cfg.audience), Inflight: cfg.maxInflight})
		if err != nil {
			return nil, nil, err
		}
	}
	return after, standin.New(standin.Config{OnUnavailable: cfg.onUnavailable, OfflineWindow: cfg.offlineWindow,
		Audience: cfg.audience, InOutage: rv.InOutage, After: after}), nil
}

// RunReviewAfter makes the owed follow-up reviews, --max-inflight-reviews
// at a time (each still takes its turn in the review gate), until ctx is
// done. It returns at once under --on-review-throttled=deny.
func (a *Authorizer) RunReviewAfter(ctx context.Context) error {
	if a.after == nil {
		return nil
	}
	a.after.Run(ctx)
	return nil
}

// observeOffline counts the checks decided offline.
func (a *Authorizer) observeOffline(d Decision) {
	if !d.Offline {
		return
	}
	result := "allow"
	if !d.Allowed() {
		result = "deny"
	}
	a.metrics.offlineChecks.WithLabelValues(result).Inc()
}

// RunKeys loads the token verification keys and keeps them fresh until ctx
// is done. Checks answer review_unavailable until a first load succeeded.
func (a *Authorizer) RunKeys(ctx context.Context) error { return a.keys.Run(ctx) }

// KeysLoaded reports whether the verification keys were loaded: readiness.
func (a *Authorizer) KeysLoaded() bool { return a.keys.Loaded() }

// observe records the metrics and the one log line of a decision. The line
// carries no token and no URL query: only the path when it held no token.
func (a *Authorizer) observe(ctx context.Context, req Request, d Decision, client string, elapsed time.Duration) {
	a.metrics.observeCheck(req.Frontend, d, elapsed)
	a.logCheck(ctx, &req, &d, client, elapsed)
}

// logPath returns the path of target without its query, or a placeholder
// when the path itself looks like it carries a token.
func logPath(target string) string {
	p, _, ok := splitTarget(target)
	if !ok {
		return "[invalid]"
	}
	if hasTokenInURL(p, "") {
		return "[redacted]"
	}
	if len(p) > 256 {
		p = p[:256]
	}
	return p
}
