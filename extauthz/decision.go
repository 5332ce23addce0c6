package extauthz

import (
	"context"
	"strings"
	"time"

	"github.com/wirekube/relay-ws/extauthz/internal/tokenreview"
	"github.com/wirekube/relay-ws/internal/clientaddr"
	"github.com/wirekube/relay-ws/internal/contract"
)

// Decide runs the checks in order, cheapest first; no API call is made until
// the request shape, the path and the origin passed. Every failure, including
// an internal one, is a deny: fail closed. It records one metric sample and
// one log line per call, and queues an Event for a refusal an operator must
// act on (internal/events; it never waits).
func (a *Authorizer) Decide(ctx context.Context, req Request) Decision {
	start := time.Now()
	client := a.clientAddress(&req)
	d := a.decide(ctx, start.Add(a.cfg.checkTimeout), &req)
	// After the decision, never before it: only a failure is counted or
	// refused, so a flood from an address agents share cannot refuse them.
	d = limitFailures(a.failures, client, d, a.now())
	d = a.signer.sign(d, client)
	a.observe(ctx, req, d, client, time.Since(start))
	a.observeOffline(d)
	a.events.Refused(d)
	return d
}

// clientAddress is the client's address as the front established it: the
// X-Forwarded-For entry --trusted-hops from the right
// (clientaddr.FromForwardedFor), else the connection's peer, parsed
// (clientaddr.Canonical: an address, "invalid", or "unknown" when neither
// is there). A check from a front outside --trusted-proxies (or from an
// unknown one) is "unverified": whoever asked wrote both.
func (a *Authorizer) clientAddress(req *Request) string {
	if !req.Front.TrustedBy(a.cfg.trustedProxies) {
		return clientaddr.Unverified
	}
	if e, ok := clientaddr.FromForwardedFor(req.ForwardedFor, a.cfg.trustedHops); ok {
		return clientaddr.Canonical(e)
	}
	return clientaddr.Canonical(req.PeerAddress)
}

// decide makes the decision; deadline is the check's (--check-timeout from
// its start). Only the calls that may wait (a signature verification that
// may fetch the JWKS, a TokenReview) run under it: a cache hit needs no
// timer. The checks run in this order, cheapest first (checks.go); the
// first that fails decides.
func (a *Authorizer) decide(ctx context.Context, deadline time.Time, req *Request) Decision {
	var c checked
	if reason := a.checkShape(req, &c); reason != "" { // the URL, Authorization, the token's shape, path, origin
		return deny(reason)
	}
	if d, ok := a.verifyLocally(ctx, deadline, &c); !ok { // signature and claims; no rule could admit it
		return d
	}
	if d, ok := a.steer(req, &c); !ok { // the bridge beside us past its full mark: no TokenReview for it (internal/steering)
		return d
	}
	if d, ok := a.reviewToken(ctx, deadline, &c); !ok { // TokenReview, or what stands in when it cannot answer
		return d
	}
	return a.bindIdentity(req, &c) // the allowlist, or the WireKubePeer, its key and the key's holder
}

// refusesFor is the follow-up reviews' rule: checkReview's, for audience.
func refusesFor(audience string) func(rv *tokenreview.Answer, token string) bool {
	return func(rv *tokenreview.Answer, token string) bool { return checkReview(rv, token, audience) != "" }
}

// checkReview maps a TokenReview answer (fresh or cached, positive or
// negative: the same rule runs on both) to a deny reason.
func checkReview(rv *tokenreview.Answer, token, audience string) contract.Reason {
	switch {
	case !rv.Authenticated && claimsOtherAudience(token, audience):
		// kube-apiserver itself answers authenticated=false for a token
		// issued for another audience. The unverified aud claim only
		// picks the more helpful 401 reason; the token stays denied.
		return contract.ReasonAudienceMismatch
	case !rv.Authenticated:
		return contract.ReasonTokenInvalid
	case !rv.HasAudience(audience):
		return contract.ReasonAudienceMismatch
	}
	return ""
}

// checkPath classifies the path and, for the relay path, checks the
// WebSocket upgrade shape.
func (a *Authorizer) checkPath(req *Request, rawPath string, targetOK bool) (pathKind, contract.Reason) {
	if req.TargetInvalid || !targetOK {
		return 0, contract.ReasonPathNotAllowed
	}
	p, ok := cleanPath(rawPath)
	if !ok {
		return 0, contract.ReasonPathNotAllowed
	}
	if p == a.cfg.relayPath {
		return pathRelay, checkWebSocket(req)
	}
	for _, prefix := range a.cfg.authnOnlyPaths {
		if underPrefix(p, prefix) {
			return pathAuthnOnly, ""
		}
	}
	return 0, contract.ReasonPathNotAllowed
}

func checkWebSocket(req *Request) contract.Reason {
	if req.Method != "GET" {
		return contract.ReasonNotWebSocket
	}
	if req.UpgradeKnown || len(req.Upgrade) > 0 {
		if len(req.Upgrade) != 1 || !strings.EqualFold(strings.TrimSpace(req.Upgrade[0]), "websocket") {
			return contract.ReasonNotWebSocket
		}
	}
	if req.ConnectionKnown || len(req.Connection) > 0 {
		if !hasToken(req.Connection, "upgrade") {
			return contract.ReasonNotWebSocket
		}
	}
	if req.HasBody {
		return contract.ReasonRequestBody
	}
	return ""
}

// hasToken reports whether a comma-separated header list holds tok.
func hasToken(values []string, tok string) bool {
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(item), tok) {
				return true
			}
		}
	}
	return false
}

func (a *Authorizer) checkOrigin(origins []string) contract.Reason {
	switch {
	case len(origins) == 0:
		return ""
	case len(origins) > 1 || strings.Contains(origins[0], ","):
		return contract.ReasonOriginNotAllowed
	case a.cfg.allowedOrigins[strings.ToLower(strings.TrimSpace(origins[0]))]:
		return ""
	}
	return contract.ReasonOriginNotAllowed
}
