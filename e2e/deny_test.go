//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testagent"
)

// testDeniedBeforeUpgrade: scenario 2. Every case is an HTTP answer, never
// an upgrade followed by a close (the agent would log a false "connected").
// The malformed requests must be refused without a TokenReview: each uses a
// token never seen before, so a review could not be a cache hit.
func (e *env) testDeniedBeforeUpgrade(t *testing.T, f front) {
	id := e.podAgent(t, peerName(f, "s2"))
	fresh := func() string { // a valid, never used token of id
		return e.tokenFor(t, stack.Namespace, agentSA, stack.TokenOptions{
			BoundKind: "Pod", BoundName: id.pod.Name, BoundUID: string(id.pod.UID)})
	}
	noReview := func(name string, fn func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			before := e.tokenReviews(t)
			fn(t)
			if n := e.tokenReviews(t) - before; n != 0 {
				t.Errorf("%d TokenReviews for a request refused by the cheap checks, want 0", n)
			}
		})
	}
	base := testagent.Options{URL: f.url, TLS: f.tls}
	noReview("no_token", func(t *testing.T) {
		wantRefused(t, base, http.StatusUnauthorized, contract.ReasonTokenMissing)
	})
	noReview("garbage_token", func(t *testing.T) {
		o := base
		o.Token = "not-a-jwt"
		wantRefused(t, o, http.StatusUnauthorized, contract.ReasonTokenMalformed)
	})
	t.Run("lower_case_bearer_accepted", func(t *testing.T) {
		o := base
		o.Header = http.Header{"Authorization": {"bearer " + id.token}}
		c, err := testagent.Dial(context.Background(), o, id.key)
		fatalIf(t, err)
		defer c.Close()
		alive(t, c, id.key)
	})
	noReview("two_authorization_headers", func(t *testing.T) {
		o := base
		tok := fresh()
		o.Header = http.Header{"Authorization": {"Bearer " + tok, "Bearer " + tok}}
		if f.name == "nginx" {
			// nginx itself refuses a duplicate Authorization header line
			// with its own 400 page, before auth_request: no reason header.
			wantRefused(t, o, http.StatusBadRequest, "")
			return
		}
		wantRefused(t, o, http.StatusBadRequest, contract.ReasonAuthorizationRepeated)
	})
	t.Run("wrong_audience", func(t *testing.T) {
		o := base
		o.Token = e.tokenFor(t, stack.Namespace, agentSA, stack.TokenOptions{
			Audience:  "https://kubernetes.default.svc.cluster.local",
			BoundKind: "Pod", BoundName: id.pod.Name, BoundUID: string(id.pod.UID)})
		wantRefused(t, o, http.StatusUnauthorized, contract.ReasonAudienceMismatch)
	})
	t.Run("expired", func(t *testing.T) {
		sa, err := e.cluster.Client.CoreV1().ServiceAccounts(stack.Namespace).Get(context.Background(), agentSA, metaGet)
		fatalIf(t, err)
		tok, err := e.cluster.SignToken(stack.SignedTokenOptions{
			ServiceAccount: sa, Pod: id.pod, Audience: contract.DefaultAudience,
			IssuedAt: time.Now().Add(-2 * time.Hour), Expiry: time.Now().Add(-time.Hour)})
		fatalIf(t, err)
		o := base
		o.Token = e.track(tok)
		wantRefused(t, o, http.StatusUnauthorized, contract.ReasonTokenInvalid)
	})
	noReview("token_in_query_beside_valid_header", func(t *testing.T) {
		o := base
		o.Token = fresh()
		o.URL = f.url + "?access_token=" + url.QueryEscape(fresh())
		wantRefused(t, o, http.StatusBadRequest, contract.ReasonTokenInURL)
	})
	t.Run("request_body", func(t *testing.T) {
		// nginx's auth subrequest carries no body, so there the bridge
		// refuses it; Envoy's CheckRequest carries its size to extauthz.
		got := raw(t, f, http.MethodGet, "/relay", upgradeHeader(id.token), "hello")
		wantRaw(t, got, http.StatusBadRequest, contract.ReasonRequestBody)
	})
	noReview("plain_get_without_upgrade", func(t *testing.T) {
		h := http.Header{"Authorization": {"Bearer " + fresh()}}
		wantRaw(t, raw(t, f, http.MethodGet, "/relay", h, ""), http.StatusBadRequest, contract.ReasonNotWebSocket)
	})
	noReview("post_upgrade", func(t *testing.T) {
		// No 405: a method other than GET is no WebSocket upgrade, refused
		// by extauthz before any review (the bridge gives the same answer).
		got := raw(t, f, http.MethodPost, "/relay", upgradeHeader(fresh()), "")
		wantRaw(t, got, http.StatusBadRequest, contract.ReasonNotWebSocket)
	})
	noReview("browser_origin", func(t *testing.T) {
		o := base
		o.Token = fresh()
		o.Header = http.Header{"Origin": {"https://evil.example.com"}}
		wantRefused(t, o, http.StatusForbidden, contract.ReasonOriginNotAllowed)
	})
}
