package extauthz

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

// review is the part of a TokenReview answer the decision uses. It holds no
// token and is what the cache stores.
type review struct {
	authenticated bool
	audiences     []string
	username      string
	uid           string
	podName       string
	podUID        string
	nodeName      string
	nodeUID       string
}

func (r *review) hasAudience(aud string) bool { return slices.Contains(r.audiences, aud) }

type cacheEntry struct {
	review  review
	expires time.Time
	// ver is the token's local verification, done before the review was
	// asked for: a hit skips the signature check while it holds
	// (tokenverify.Verified.Holds).
	ver *tokenverify.Verified
}

// cacheKey is HMAC-SHA256(per-process key, audience NUL token): the token
// itself is never a key and never stored.
type cacheKey [sha256.Size]byte

var (
	errThrottled   = reviewgate.ErrThrottled
	errUnavailable = errors.New("tokenreview: api unavailable")
)

// reviewer answers "is this token valid" through a cache, one TokenReview per
// distinct token at a time (singleflight) and at most maxInflight TokenReview
// calls at once. Safe for concurrent use.
type reviewer struct {
	log      *slog.Logger // TokenReview failures (reviewerr.go); nil: not logged
	client   authnv1client.TokenReviewsGetter
	audience string
	hmacKey  []byte
	cache    *lru.Cache[cacheKey, cacheEntry]
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

func newReviewer(client authnv1client.TokenReviewsGetter, cfg *Config, now func() time.Time, m *metrics, o *outage) (*reviewer, error) {
	c, err := lru.New[cacheKey, cacheEntry](cfg.cacheSize)
	if err != nil {
		return nil, fmt.Errorf("tokenreview cache: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("tokenreview cache key: %w", err)
	}
	gate := reviewgate.New(cfg.reviewQPS, cfg.reviewBurst, cfg.maxInflight, cfg.maxReviewWait, m.gateRefusals)
	return &reviewer{
		client: client, audience: cfg.audience, hmacKey: key, cache: c,
		gate: gate, outage: o,
		ttl: cfg.cacheTTL, negTTL: cfg.negativeCacheTTL, now: now, metrics: m,
	}, nil
}

// keyMAC is a pooled HMAC with its scratch buffers: the token is copied into
// in rather than converted, so computing a key allocates nothing.
type keyMAC struct {
	h   hash.Hash
	in  []byte
	sum []byte
}

func (r *reviewer) key(token string) cacheKey {
	m, _ := r.macs.Get().(*keyMAC)
	if m == nil {
		m = &keyMAC{h: hmac.New(sha256.New, r.hmacKey), sum: make([]byte, 0, sha256.Size)}
	}
	defer r.macs.Put(m)
	m.h.Reset()
	m.in = append(append(append(m.in[:0], r.audience...), 0), token...)
	m.h.Write(m.in)
	clear(m.in) // the pooled buffer keeps no token
	var k cacheKey
	copy(k[:], m.h.Sum(m.sum[:0]))
	return k
}

// cachedVerification returns the verification kept with the live cached
// answer of key k, if there is one. It does not count as a cache hit.
func (r *reviewer) cachedVerification(k cacheKey) (*tokenverify.Verified, bool) {
	e, ok := r.cache.Peek(k)
	if !ok || !r.now().Before(e.expires) {
		return nil, false
	}
	return e.ver, true
}

// cachedReview returns the live cached answer of key k, counted as a cache
// hit, or false. Review looks again (the answer may have arrived since).
func (r *reviewer) cachedReview(k cacheKey) (review, bool) {
	e, ok := r.cache.Get(k)
	if !ok || !r.now().Before(e.expires) {
		return review{}, false
	}
	r.metrics.cacheHit(e.review.authenticated)
	return e.review, true
}

// Review returns the TokenReview answer for token, whose key is k, from the
// cache when possible. exp is the token's own expiry (zero if unknown); ver
// its local verification, cached with the answer; a call to the API counts against
// the share of the review gate of the identity ver names (tokenverify.Claims.IdentityKey). On
// failure the reason is review_unavailable or review_throttled: fail closed.
func (r *reviewer) Review(ctx context.Context, k cacheKey, token string, exp time.Time, ver *tokenverify.Verified) (review, bool, contract.Reason) {
	if e, ok := r.cache.Get(k); ok {
		if r.now().Before(e.expires) {
			r.metrics.cacheHit(e.review.authenticated)
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
		if errors.Is(res.Err, errThrottled) {
			return review{}, false, contract.ReasonReviewThrottled
		}
		if res.Err != nil {
			return review{}, false, contract.ReasonReviewUnavailable
		}
		return res.Val.(review), false, ""
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			// The proxy or the client hung up: nobody waits for the answer,
			// and the API is not to blame (no outage recorded).
			r.callerGone()
			return review{}, false, contract.ResultCanceled
		}
		if _, inCall := r.calling.Load(k); inCall {
			r.outage.failed(r.now()) // the API is too slow to answer in time
			return review{}, false, contract.ReasonReviewUnavailable
		}
		return review{}, false, contract.ReasonReviewThrottled
	}
}

// fetch passes the review gate (a rate token, then an in-flight slot held
// only for the call), asks the API and caches the answer. Errors are never
// cached.
func (r *reviewer) fetch(ctx context.Context, k cacheKey, token string, exp time.Time, ver *tokenverify.Verified) (review, error) {
	return r.fetchWithin(ctx, k, token, exp, ver, r.gate.MaxWait())
}

// fetchWithin is fetch with a wait of at most wait for the review gate.
func (r *reviewer) fetchWithin(ctx context.Context, k cacheKey, token string, exp time.Time, ver *tokenverify.Verified, wait time.Duration) (review, error) {
	release, err := r.gate.EnterWithin(ctx, ver.Identity(), wait)
	if err != nil {
		return review{}, err
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
		return review{}, errUnavailable
	}
	rv := reviewFromStatus(&tr.Status)
	now := r.now()
	ttl := r.negTTL
	result := "unauthenticated"
	if rv.authenticated {
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

func reviewFromStatus(st *authnv1.TokenReviewStatus) review {
	rv := review{
		authenticated: st.Authenticated,
		audiences:     slices.Clone(st.Audiences),
		username:      st.User.Username,
		uid:           st.User.UID,
	}
	first := func(k string) string {
		if v := st.User.Extra[k]; len(v) == 1 {
			return v[0]
		}
		return ""
	}
	rv.podName, rv.podUID = first(extraPodName), first(extraPodUID)
	rv.nodeName, rv.nodeUID = first(extraNodeName), first(extraNodeUID)
	return rv
}
