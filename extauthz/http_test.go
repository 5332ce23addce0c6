package extauthz

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
)

func TestHTTPMode(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.tokens()
	srv := httptest.NewServer(&HTTPHandler{Authorizer: e.authz})
	defer srv.Close()
	tests := []struct {
		name    string
		method  string
		path    string
		headers map[string][]string
		status  int
		reason  contract.Reason
		peer    string
	}{
		{name: "nginx auth_request with X-Original-URI", method: "GET", path: "/auth",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["agent-pod"]}, "X-Original-Uri": {"/relay"},
				"X-Original-Method": {"GET"}, "Upgrade": {"websocket"}, "Connection": {"upgrade"}},
			status: 200, peer: "node-a"},
		{name: "nginx, plain GET without Upgrade", method: "GET", path: "/",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["peer-sa"]}, "X-Original-Uri": {"/relay"}},
			status:  400, reason: contract.ReasonNotWebSocket},
		{name: "nginx, Upgrade without Connection", method: "GET", path: "/",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["peer-sa"]}, "X-Original-Uri": {"/relay"}, "Upgrade": {"websocket"}},
			status:  200, peer: "node-b"},
		{name: "traefik drops hop-by-hop headers", method: "GET", path: "/",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["peer-sa"]}, "X-Forwarded-Uri": {"/relay"}, "X-Forwarded-Method": {"GET"}},
			status:  200, peer: "node-b"},
		{name: "traefik/caddy X-Forwarded-*", method: "GET", path: "/",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["agent-pod"]}, "X-Forwarded-Uri": {"/relay"},
				"X-Forwarded-Method": {"GET"}, "Upgrade": {"websocket"}},
			status: 200, peer: "node-a"},
		{name: "ingress-nginx X-Original-URL", method: "GET", path: "/",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["agent-pod"]}, "X-Original-Url": {"https://relay.example.com/relay"}, "Upgrade": {"websocket"}},
			status:  200, peer: "node-a"},
		// ingress-nginx's auth-url location as the controller renders it: no
		// Upgrade, nginx's own Connection: close (see extauthz/hopbyhop.go).
		{name: "ingress-nginx auth-url: no Upgrade, Connection close", method: "GET", path: "/",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["agent-pod"]}, "X-Original-Url": {"https://relay.example.com/relay"},
				"X-Original-Method": {"GET"}, "Connection": {"close"}, "X-Sent-From": {"nginx-ingress-controller"}},
			status: 200, peer: "node-a"},
		{name: "ingress-nginx auth-snippet adds Upgrade, Connection stays close", method: "GET", path: "/",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["agent-pod"]}, "X-Original-Url": {"https://relay.example.com/relay"},
				"X-Original-Method": {"GET"}, "Upgrade": {"websocket"}, "Connection": {"close"}},
			status: 200, peer: "node-a"},
		{name: "ingress-nginx, original method POST", method: "GET", path: "/",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["agent-pod"]}, "X-Original-Url": {"https://relay.example.com/relay"},
				"X-Original-Method": {"POST"}, "Connection": {"close"}},
			status: 400, reason: contract.ReasonNotWebSocket},
		{name: "ingress-nginx, an Upgrade that is not websocket", method: "GET", path: "/",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["agent-pod"]}, "X-Original-Url": {"https://relay.example.com/relay"},
				"X-Original-Method": {"GET"}, "Upgrade": {"h2c"}, "Connection": {"close"}},
			status: 400, reason: contract.ReasonNotWebSocket},
		{name: "nginx snippet forwards Connection: close is still refused", method: "GET", path: "/",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["peer-sa"]}, "X-Original-Uri": {"/relay"},
				"X-Original-Method": {"GET"}, "Upgrade": {"websocket"}, "Connection": {"close"}},
			status: 400, reason: contract.ReasonNotWebSocket},
		{name: "traefik, Connection of its own hop ignored", method: "GET", path: "/",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["peer-sa"]}, "X-Forwarded-Uri": {"/relay"},
				"X-Forwarded-Method": {"GET"}, "Connection": {"close"}},
			status: 200, peer: "node-b"},
		{name: "envoy http_service appends the path", method: "GET", path: "/relay",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["agent-pod"]}, "Upgrade": {"websocket"}, "Connection": {"Upgrade"}},
			status:  200, peer: "node-a"},
		{name: "two Authorization headers", method: "GET", path: "/relay",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["agent-pod"], "Bearer " + tok["peer-sa"]}},
			status:  400, reason: contract.ReasonAuthorizationRepeated},
		{name: "token in original URI", method: "GET", path: "/",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["agent-pod"]}, "X-Original-Uri": {"/relay?access_token=x"}},
			status:  400, reason: contract.ReasonTokenInURL},
		{name: "client X-Forwarded-Uri conflicts with the proxy's", method: "GET", path: "/",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["prometheus"]}, "X-Original-Uri": {"/relay"}, "X-Forwarded-Uri": {"/metrics"}},
			status:  403, reason: contract.ReasonPathNotAllowed},
		{name: "original method POST", method: "GET", path: "/",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["agent-pod"]}, "X-Original-Uri": {"/relay"}, "X-Original-Method": {"POST"}},
			status:  400, reason: contract.ReasonNotWebSocket},
		{name: "upgrade to something else", method: "GET", path: "/relay",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["agent-pod"]}, "Upgrade": {"h2c"}},
			status:  400, reason: contract.ReasonNotWebSocket},
		{name: "missing token", method: "GET", path: "/relay", status: 401, reason: contract.ReasonTokenMissing},
		{name: "api down", method: "GET", path: "/relay",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["api-error"]}, "Upgrade": {"websocket"}}, status: 503, reason: contract.ReasonReviewUnavailable},
		{name: "authn-only", method: "GET", path: "/",
			headers: map[string][]string{"Authorization": {"Bearer " + tok["prometheus"]}, "X-Forwarded-Uri": {"/metrics"}}, status: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			must(t, err)
			for k, vs := range tc.headers {
				for _, v := range vs {
					req.Header.Add(k, v)
				}
			}
			resp, err := srv.Client().Do(req)
			must(t, err)
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, resp.Header.Get(contract.HeaderDenyReason), tc.status)
			}
			if got := contract.Reason(resp.Header.Get(contract.HeaderDenyReason)); got != tc.reason {
				t.Errorf("reason %q, want %q", got, tc.reason)
			}
			if (resp.Header.Get("WWW-Authenticate") == "Bearer") != (tc.status == 401) {
				t.Errorf("WWW-Authenticate %q on %d", resp.Header.Get("WWW-Authenticate"), tc.status)
			}
			if cc := resp.Header.Get("Cache-Control"); tc.status != 200 && cc != "no-store" {
				t.Errorf("Cache-Control %q on %d, want no-store", cc, tc.status)
			}
			assertHTTPIdentity(t, resp.Header, tc.status, tc.peer)
		})
	}
}

func assertHTTPIdentity(t *testing.T, h http.Header, status int, peer string) {
	t.Helper()
	switch {
	case status != 200:
		for _, name := range contract.IdentityHeaders {
			if h.Get(name) != "" {
				t.Errorf("deny carries %s", name)
			}
		}
	case peer == "":
		if !strings.HasPrefix(h.Get(contract.HeaderIdentity), "system:serviceaccount:monitoring:") || h.Get(contract.HeaderPeer) != "" {
			t.Errorf("authn-only headers: %v", h)
		}
	default:
		if h.Get(contract.HeaderPeer) != peer || h.Get(contract.HeaderPublicKey) != fixtureKeys[peer] ||
			h.Get(contract.HeaderTokenExpires) == "" || h.Get("X-Envoy-Auth-Headers-To-Remove") != "authorization" {
			t.Errorf("allow headers: %v", h)
		}
	}
}
