// Package tokenreview asks kube-apiserver whether a ServiceAccount token is
// valid (TokenReview) and remembers the answer: a cache keyed by an HMAC of
// the token (never the token), one call per distinct token at a time
// (single flight), every call behind the fair review gate
// (extauthz/internal/reviewgate), each failure counted by category, and
// whether the API is in an outage (for --on-review-unavailable). It decides
// nothing: the Authorizer reads the Answer.
package tokenreview

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/wirekube/relay-ws/extauthz/internal/reviewgate"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenverify"
	"github.com/wirekube/relay-ws/internal/contract"
)

// Keys of TokenReview status.user.extra that bind a token to an object.
const (
	extraPodName  = "authentication.kubernetes.io/pod-name"
	extraPodUID   = "authentication.kubernetes.io/pod-uid"
	extraNodeName = "authentication.kubernetes.io/node-name"
	extraNodeUID  = "authentication.kubernetes.io/node-uid"
)

// Answer is the part of a TokenReview answer the decision uses. It holds no
// token and is what the cache stores.
type Answer struct {
	Authenticated bool
	Audiences     []string
	Username      string
	UID           string
	PodName       string
	PodUID        string
	NodeName      string
	NodeUID       string
}

// HasAudience reports whether the answer accepts the token for aud.
func (r *Answer) HasAudience(aud string) bool { return slices.Contains(r.Audiences, aud) }

type cacheEntry struct {
	review  Answer
	expires time.Time
	// ver is the token's local verification, done before the review was
	// asked for: a hit skips the signature check while it holds
	// (tokenverify.Verifier.Holds).
	ver *tokenverify.Verified
}

// Key is HMAC-SHA256(per-process key, audience NUL token): the token
// itself is never a key and never stored.
type Key [sha256.Size]byte

var (
	// ErrThrottled: the review gate could not serve the call in time.
	ErrThrottled = reviewgate.ErrThrottled
	// ErrUnavailable: the API failed the call (its error is not returned:
	// it may quote the request).
	ErrUnavailable = errors.New("tokenreview: api unavailable")
)

// Config are a Reviewer's settings and collaborators. Client, Now and Reg
// are required; Log nil logs no failure.
type Config struct {
	Client   authnv1client.TokenReviewsGetter
	Audience string
	// CacheSize bounds the cache (--cache-size); TTL and NegativeTTL are
	// how long an accepted and a refused answer are served (--cache-ttl,
	// --negative-cache-ttl); an accepted one never past the token's exp.
	CacheSize        int
	TTL, NegativeTTL time.Duration
	// The review gate: QPS and Burst (--kube-api-qps, --kube-api-burst),
	// MaxInflight calls at once (--max-inflight-reviews), MaxWait the
	// longest wait of a check (--max-review-wait).
	QPS         float64
	Burst       int
	MaxInflight int
	MaxWait     time.Duration
	Now         func() time.Time
	Log         *slog.Logger
	Reg         prometheus.Registerer
}

// Reviewer answers "is this token valid" through a cache, one TokenReview per
// distinct token at a time (singleflight) and at most MaxInflight TokenReview
// calls at once. Safe for concurrent use.
type Reviewer struct {
	log      *slog.Logger // TokenReview failures (reviewFailed); nil: not logged
	client   authnv1client.TokenReviewsGetter
	audience string
	hmacKey  []byte
	cache    *lru.Cache[Key, cacheEntry]
	group    singleflight.Group
	// calling holds the keys whose TokenReview call is in progress (past the
	// in-flight slot), so a caller whose deadline passes can tell a slow API
	// (review_unavailable) from a wait for a slot (review_throttled).
	calling sync.Map
	macs    sync.Pool // of *keyMAC keyed with hmacKey
	gate    *reviewgate.Gate
	outage  *outage
	ttl     time.Duration
	negTTL  time.Duration
	now     func() time.Time
	metrics *metrics
}

// New builds a Reviewer and registers its metrics on c.Reg.
func New(c Config) (*Reviewer, error) {
	cache, err := lru.New[Key, cacheEntry](c.CacheSize)
	if err != nil {
		return nil, fmt.Errorf("tokenreview cache: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("tokenreview cache key: %w", err)
	}
	m, err := newMetrics(c.Reg, func() int { return cache.Len() })
	if err != nil {
		return nil, fmt.Errorf("tokenreview metrics: %w", err)
	}
	gate := reviewgate.New(c.QPS, c.Burst, c.MaxInflight, c.MaxWait, m.gateRefusals)
	return &Reviewer{
		log: c.Log, client: c.Client, audience: c.Audience, hmacKey: key, cache: cache,
		gate: gate, outage: &outage{gauge: m.reviewOutage.Set},
		ttl: c.TTL, negTTL: c.NegativeTTL, now: c.Now, metrics: m,
	}, nil
}

// keyMAC is a pooled HMAC with its scratch buffers: the token is copied into
// in rather than converted, so computing a key allocates nothing.
type keyMAC struct {
	h   hash.Hash
	in  []byte
	sum []byte
}

// Key is the cache key of token.
func (r *Reviewer) Key(token string) Key {
	m, _ := r.macs.Get().(*keyMAC)
	if m == nil {
		m = &keyMAC{h: hmac.New(sha256.New, r.hmacKey), sum: make([]byte, 0, sha256.Size)}
	}
	defer r.macs.Put(m)
	m.h.Reset()
	m.in = append(append(append(m.in[:0], r.audience...), 0), token...)
	m.h.Write(m.in)
	clear(m.in) // the pooled buffer keeps no token
	var k Key
	copy(k[:], m.h.Sum(m.sum[:0]))
	return k
}

// CachedVerification returns the verification kept with the live cached
// answer of key k, if there is one. It does not count as a cache hit.
func (r *Reviewer) CachedVerification(k Key) (*tokenverify.Verified, bool) {
	e, ok := r.cache.Peek(k)
	if !ok || !r.now().Before(e.expires) {
		return nil, false
	}
	return e.ver, true
}

// Cached returns the live cached answer of key k, counted as a cache
// hit, or false. Review looks again (the answer may have arrived since).
func (r *Reviewer) Cached(k Key) (Answer, bool) {
	e, ok := r.cache.Get(k)
	if !ok || !r.now().Before(e.expires) {
		return Answer{}, false
	}
	r.metrics.cacheHit(e.review.Authenticated)
	return e.review, true
}

// Forget drops the cached answer of key k: its token no longer verifies.
func (r *Reviewer) Forget(k Key) { r.cache.Remove(k) }

// Review returns the TokenReview answer for token, whose key is k, from the
// cache when possible. exp is the token's own expiry (zero if unknown); ver
// its local verification, cached with the answer; a call to the API counts against
// the share of the review gate of the identity ver names (tokenverify.Claims.IdentityKey). On
// failure the reason is review_unavailable or review_throttled: fail closed.
func (r *Reviewer) Review(ctx context.Context, k Key, token string, exp time.Time, ver *tokenverify.Verified) (Answer, bool, contract.Reason) {
	if e, ok := r.cache.Get(k); ok {
		if r.now().Before(e.expires) {
			r.metrics.cacheHit(e.review.Authenticated)
			return e.review, true, ""
		}
		r.cache.Remove(k)
	}
	r.metrics.cacheMisses.Inc()
	// The shared call must not die with the first caller's cancellation, only
	// with its deadline: other callers wait on the same answer.
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = r.now().Add(time.Minute)
	}
	ch := r.group.DoChan(string(k[:]), func() (any, error) {
		// A caller that missed the cache just before another caller's call
		// for k finished and cached its answer starts a call of its own:
		// it takes that answer instead of a second TokenReview.
		if e, ok := r.cache.Peek(k); ok && r.now().Before(e.expires) {
			return e.review, nil
		}
		fctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		defer cancel()
		return r.fetch(fctx, k, token, exp, ver)
	})
	select {
	case res := <-ch:
		if errors.Is(res.Err, ErrThrottled) {
			return Answer{}, false, contract.ReasonReviewThrottled
		}
		if res.Err != nil {
			return Answer{}, false, contract.ReasonReviewUnavailable
		}
		return res.Val.(Answer), false, ""
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			// The proxy or the client hung up: nobody waits for the answer,
			// and the API is not to blame (no outage recorded).
			r.callerGone()
			return Answer{}, false, contract.ResultCanceled
		}
		if _, inCall := r.calling.Load(k); inCall {
			r.outage.failed(r.now()) // the API is too slow to answer in time
			return Answer{}, false, contract.ReasonReviewUnavailable
		}
		return Answer{}, false, contract.ReasonReviewThrottled
	}
}

// fetch passes the review gate (a rate token, then an in-flight slot held
// only for the call), asks the API and caches the answer. Errors are never
// cached.
func (r *Reviewer) fetch(ctx context.Context, k Key, token string, exp time.Time, ver *tokenverify.Verified) (Answer, error) {
	return r.FetchWithin(ctx, k, token, exp, ver, r.gate.MaxWait())
}

// FetchWithin is fetch with a wait of at most wait for the review gate
// (a follow-up review waits longer than a check). It returns ErrThrottled
// or ErrUnavailable on failure.
func (r *Reviewer) FetchWithin(ctx context.Context, k Key, token string, exp time.Time, ver *tokenverify.Verified, wait time.Duration) (Answer, error) {
	release, err := r.gate.EnterWithin(ctx, ver.Identity(), wait)
	if err != nil {
		return Answer{}, err
	}
	defer release()
	r.calling.Store(k, struct{}{})
	defer r.calling.Delete(k)
	r.metrics.inflight.Inc()
	start := time.Now()
	tr, err := r.client.TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{r.audience}},
	}, metav1.CreateOptions{})
	r.metrics.inflight.Dec()
	elapsed := time.Since(start)
	r.outage.record(err, r.now())
	if err != nil {
		r.metrics.observeReview("error", elapsed)
		r.reviewFailed(ctx, err, elapsed)
		// The client error may quote the request; it is not returned so it
		// cannot reach a log line.
		return Answer{}, ErrUnavailable
	}
	rv := reviewFromStatus(&tr.Status)
	now := r.now()
	ttl := r.negTTL
	result := "unauthenticated"
	if rv.Authenticated {
		result = "authenticated"
		ttl = r.ttl
		if !exp.IsZero() {
			ttl = min(ttl, exp.Sub(now))
		}
	}
	r.metrics.observeReview(result, elapsed)
	if ttl > 0 {
		r.cache.Add(k, cacheEntry{review: rv, expires: now.Add(ttl), ver: ver})
	}
	return rv, nil
}

func reviewFromStatus(st *authnv1.TokenReviewStatus) Answer {
	rv := Answer{
		Authenticated: st.Authenticated,
		Audiences:     slices.Clone(st.Audiences),
		Username:      st.User.Username,
		UID:           st.User.UID,
	}
	first := func(k string) string {
		if v := st.User.Extra[k]; len(v) == 1 {
			return v[0]
		}
		return ""
	}
	rv.PodName, rv.PodUID = first(extraPodName), first(extraPodUID)
	rv.NodeName, rv.NodeUID = first(extraNodeName), first(extraNodeUID)
	return rv
}

// reviewFailed counts and logs one failed TokenReview. The line carries the
// category, the status code and the latency: no token, no error text.
func (r *Reviewer) reviewFailed(ctx context.Context, err error, elapsed time.Duration) {
	cat := reviewFailCategory(err)
	r.metrics.reviewFailures.WithLabelValues(cat).Inc()
	if r.log != nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "tokenreview failed",
			slog.String("category", cat), slog.Int("status", statusCode(err)), slog.Duration("latency", elapsed))
	}
}

// callerGone counts a check whose caller hung up (context.Canceled) before
// its TokenReview answered: not an API failure and not an outage.
func (r *Reviewer) callerGone() {
	r.metrics.reviewFailures.WithLabelValues(FailCanceled).Inc()
}

// InOutage reports whether TokenReview calls have been failing (no answer
// since the first failure) for at most window: the time verify-offline may
// stand in (--offline-window).
func (r *Reviewer) InOutage(window time.Duration) bool { return r.outage.within(r.now(), window) }
