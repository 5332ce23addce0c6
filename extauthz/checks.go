package extauthz

import (
	"context"
	"time"

	"github.com/wirekube/relay-ws/extauthz/internal/tokenreview"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenverify"
	"github.com/wirekube/relay-ws/internal/contract"
)

// checked is what the steps of decide have established so far.
type checked struct {
	token   string
	k       tokenreview.Key // the HMAC of the whole token
	kind    pathKind
	cached  *tokenverify.Verified // a verification found in the cache
	inCache bool
	held    bool // cached holds: no new verification needed
	ver     *tokenverify.Verified
	exp     time.Time // the verified claims' expiry
	rv      tokenreview.Answer
	hit     bool // the TokenReview answer came from the cache
	offline bool // --on-review-unavailable=verify-offline stood in
	owed    bool // review-after: admitted on the claims, the TokenReview follows
}

// checkShape checks what the request itself shows: no token in the URL,
// one Bearer Authorization, a token of the right shape, the path, the
// upgrade and the origin.
func (a *Authorizer) checkShape(req *Request, c *checked) contract.Reason {
	p, rawQuery, ok := splitTarget(req.Target)
	if ok && hasTokenInURL(p, rawQuery) {
		return contract.ReasonTokenInURL
	}
	token, reason := parseAuthorization(req.Authorization)
	if reason != "" {
		return reason
	}
	c.token, c.k = token, a.reviewer.Key(token)
	c.cached, c.inCache = a.reviewer.CachedVerification(c.k)
	c.held = c.inCache && a.verifier.Holds(c.cached)
	// A held verification is of these very bytes (k is the HMAC of the
	// whole token), which passed checkPayload before they were verified:
	// its answer cannot have changed.
	if !c.held && checkPayload(token) != nil {
		return contract.ReasonTokenMalformed
	}
	if c.kind, reason = a.checkPath(req, p, ok); reason != "" {
		return reason
	}
	return a.checkOrigin(req.Origin)
}

// verifyLocally checks the token's signature and claims against the
// cluster's published keys (or a verification that still holds), then,
// before any API call, that a rule could admit its identity.
func (a *Authorizer) verifyLocally(ctx context.Context, deadline time.Time, c *checked) (Decision, bool) {
	ver, reason, detail := c.cached, contract.Reason(""), ""
	if !c.held {
		vctx, cancel := context.WithDeadline(ctx, deadline)
		ver, reason, detail = a.verifyAgain(vctx, c.k, c.token, c.inCache)
		cancel()
	}
	if reason != "" {
		d := Decision{Reason: reason, Detail: detail}
		if detail == tokenverify.DetailExpired && ver != nil {
			d.ClaimedNode = claimedNode(ver.Claims) // an expired token: whose node did not refresh it
			d.admissible = a.admissible(ver.Claims, c.kind)
		}
		return d, false
	}
	c.ver = ver
	if c.kind == pathRelay && ver.Claims.SecretBound() {
		return deny(contract.ReasonTokenSecretBound), false // before any TokenReview is spent on it
	}
	// The expiry of the verified claims (checkClaims requires one): it
	// bounds the cache entry and becomes X-WireKube-Token-Expires.
	c.exp = ver.Claims.Expiry.Time().UTC()
	if !a.admissible(ver.Claims, c.kind) {
		// Before any API call: no rule admits this identity (binding.Rules.Admissible).
		return Decision{Reason: contract.ReasonIdentityNotAllowed, Detail: detailSubjectRefused}, false
	}
	return Decision{}, true
}

// reviewToken asks TokenReview (cached, behind the fair gate); when it
// cannot answer, --on-review-unavailable and --on-review-throttled decide
// what stands in. The answer must accept the token for the audience.
func (a *Authorizer) reviewToken(ctx context.Context, deadline time.Time, c *checked) (Decision, bool) {
	claims := c.ver.Claims
	var reason contract.Reason
	c.rv, c.hit = a.reviewer.Cached(c.k)
	if !c.hit {
		rctx, cancel := context.WithDeadline(ctx, deadline)
		c.rv, c.hit, reason = a.reviewer.Review(rctx, c.k, c.token, c.exp, c.ver)
		cancel()
	}
	if reason == contract.ReasonReviewUnavailable || reason == contract.ReasonReviewThrottled {
		c.rv, c.offline, c.owed, reason = a.standIns.Stand(claims, c.kind == pathRelay, reason)
	}
	if reason == "" {
		reason = checkReview(&c.rv, c.token, a.cfg.audience)
	}
	if reason != "" {
		return Decision{Reason: reason, CacheHit: c.hit, ClaimedNode: claimedNode(claims)}, false
	}
	return Decision{}, true
}

// bindIdentity binds the reviewed identity: on the authn-only path to the
// allowlist; on the relay path to its WireKubePeer and key, then to no
// other binding's live session holding that key.
func (a *Authorizer) bindIdentity(req *Request, c *checked) Decision {
	var d Decision
	if c.kind == pathAuthnOnly {
		d = a.allowListed(&c.rv)
	} else {
		d = a.bindPeer(&c.rv, c.exp)
		if !d.Allowed() && d.Peer == "" {
			d.ClaimedNode = c.rv.NodeName // the log names the node of a refused binding
		}
		if d.Allowed() && !probeOnly(req.Subprotocols) {
			d = a.checkKeyHolder(d)
		}
		if c.owed {
			d = a.oweReview(d, c)
		}
	}
	d.CacheHit, d.Offline = c.hit, c.offline
	d.ReviewOwed = c.owed && d.Allowed()
	d.Identity = c.rv.Username
	return d
}

// oweReview queues the follow-up of an allow d made under review-after;
// when the queue is full the allow becomes review_throttled.
func (a *Authorizer) oweReview(d Decision, c *checked) Decision {
	if !d.Allowed() {
		return d
	}
	if !a.after.Owe(c.k, c.token, c.exp, c.ver, &c.rv, d.binding) {
		return deny(contract.ReasonReviewThrottled)
	}
	return d
}

// steer turns a new relay session away from a bridge past its full mark
// before any TokenReview is spent on it (internal/steering,
// docs/steering.md): 503 draining or at_capacity, or the bounce answer.
// ok is true when the check goes on. Off the relay path and for a probe
// (it registers nothing and must reach the bridge that holds the peer) it
// steers nothing.
func (a *Authorizer) steer(req *Request, c *checked) (d Decision, ok bool) {
	if c.kind != pathRelay || probeOnly(req.Subprotocols) {
		return Decision{}, true
	}
	switch reason := a.steering.Turn(); reason {
	case "":
		return Decision{}, true
	case contract.ResultBounced:
		return bounce(), false
	default:
		return deny(reason), false
	}
}

// bounce is the bounce answer: an allow whose only identity header is
// X-WireKube-Binding: bounce; identitySigner.sign adds the client address
// and the signature over the two (contract.BindingBounce).
func bounce() Decision {
	hs := make([]Header, 1, 1+signedHeaders)
	hs[0] = Header{contract.HeaderBinding, contract.BindingBounce}
	return Decision{Headers: hs, Bounced: true, signRoom: true}
}
