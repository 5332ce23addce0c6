package extauthz

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/codes"
	authnv1 "k8s.io/api/authentication/v1"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
	"github.com/wirekube/relay-ws/internal/test/contractdoc"
)

// checkRequest builds a CheckRequest as Envoy fills it for a WebSocket
// upgrade of target with token; edit adjusts the lower-case header map.
func checkRequest(method, target, token string, edit func(h map[string]string)) *authv3.CheckRequest {
	h := map[string]string{
		":authority":             "relay.example.com",
		":method":                method,
		":path":                  target,
		":scheme":                "https",
		"upgrade":                "websocket",
		"connection":             "Upgrade",
		"sec-websocket-version":  "13",
		"sec-websocket-key":      "dGhlIHNhbXBsZSBub25jZQ==",
		"sec-websocket-protocol": contract.Subprotocol,
		"user-agent":             "wirekube-agent/0.0.17",
		"x-forwarded-proto":      "https",
		"x-request-id":           "f2b6c3f0-0000-4000-8000-000000000001",
	}
	if token != "" {
		h["authorization"] = "Bearer " + token
	}
	if edit != nil {
		edit(h)
	}
	// Envoy always names the connection's peer; with no x-forwarded-for it
	// is the client address (fixtureSource).
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: fixtureSource, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Id: "1", Method: method, Path: target, Host: "relay.example.com", Scheme: "https",
			Protocol: "HTTP/1.1", Headers: h, Size: 0,
		}},
	}}
}

// fixtureSource is the source address of checkRequest's requests.
const fixtureSource = "192.0.2.10"

func relayCheck(token string, edit func(h map[string]string)) *authv3.CheckRequest {
	return checkRequest("GET", "/relay", token, edit)
}

// tokens returns one token per identity fixture of the table.
func (e *env) tokens() map[string]string {
	agent := func(extra map[string]string) string {
		return e.answer(static(saStatus("wirekube-system", "wirekube-agent", agentSAUID, extra)))
	}
	peer := func(node, uid string) string {
		return e.answer(static(saStatus("wirekube-system", "wirekube-relay-peer-"+node, uid, nil)))
	}
	peerBound := func(extra map[string]string) string {
		return e.answer(static(saStatus("wirekube-system", "wirekube-relay-peer-node-b", "uid-sa-peer-b", extra)))
	}
	peerPod := map[string]string{"pod-name": "peer-b-pod", "pod-uid": "uid-pod-peer-b", "node-name": "node-a", "node-uid": nodeAUID}
	podA := map[string]string{"pod-name": "agent-a", "pod-uid": podAUID, "node-name": "node-a", "node-uid": nodeAUID}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for k2, v2 := range podA {
			m[k2] = v2
		}
		m[k] = v
		return m
	}
	wrongAud := saStatus("wirekube-system", "wirekube-agent", agentSAUID, podA)
	wrongAud.Audiences = []string{"https://kubernetes.default.svc"}
	// What kube-apiserver answers for a token of another audience.
	rejected := authnv1.TokenReviewStatus{Error: "token audiences are invalid for the target audiences"}
	user := saStatus("x", "y", "u", nil)
	user.User.Username = "alice"
	return map[string]string{
		"agent-pod":         agent(podA),
		"agent-node":        agent(map[string]string{"node-name": "node-a", "node-uid": nodeAUID}),
		"agent-unbound":     agent(map[string]string{"credential-id": "JTI=1"}),
		"pod-missing":       agent(with("pod-name", "agent-ghost")),
		"pod-uid":           agent(with("pod-uid", "uid-other")),
		"pod-sa":            agent(map[string]string{"pod-name": "agent-other-sa", "pod-uid": "uid-pod-other"}),
		"pod-unscheduled":   agent(map[string]string{"pod-name": "agent-pending", "pod-uid": "uid-pod-pending"}),
		"pod-node":          agent(with("node-name", "node-z")),
		"pod-succeeded":     agent(map[string]string{"pod-name": "agent-done", "pod-uid": "uid-pod-done", "node-name": "node-a"}),
		"pod-failed":        agent(map[string]string{"pod-name": "agent-failed", "pod-uid": "uid-pod-failed", "node-name": "node-a"}),
		"pod-running":       agent(map[string]string{"pod-name": "agent-running", "pod-uid": "uid-pod-running", "node-name": "node-a"}),
		"node-uid":          agent(map[string]string{"node-name": "node-a", "node-uid": "uid-node-old"}),
		"node-missing":      agent(map[string]string{"node-name": "node-gone"}),
		"peer-sa":           peer("node-b", "uid-sa-peer-b"),
		"peer-sa-uid":       peer("node-b", "uid-sa-peer-b-old"),
		"peer-pod":          peerBound(peerPod),
		"peer-pod-gone":     peerBound(map[string]string{"pod-name": "peer-b-ghost", "pod-uid": "uid-ghost"}),
		"peer-pod-uid":      peerBound(map[string]string{"pod-name": "peer-b-pod", "pod-uid": "uid-other"}),
		"peer-pod-sa":       peerBound(map[string]string{"pod-name": "agent-a", "pod-uid": podAUID}),
		"peer-pod-node":     peerBound(map[string]string{"pod-name": "peer-b-pod", "pod-uid": "uid-pod-peer-b", "node-name": "node-z"}),
		"peer-pod-node-uid": peerBound(map[string]string{"pod-name": "peer-b-pod", "pod-uid": "uid-pod-peer-b", "node-name": "node-a", "node-uid": "uid-node-old"}),
		"peer-node-gone":    peerBound(map[string]string{"node-name": "node-gone", "node-uid": "uid-node-gone"}),
		"peer-node":         peerBound(map[string]string{"node-name": "node-a", "node-uid": nodeAUID}),
		"pod-node-gone":     agent(map[string]string{"pod-name": "agent-orphan", "pod-uid": "uid-pod-orphan", "node-name": "node-gone", "node-uid": "uid-node-gone"}),
		"pod-node-gone-old": agent(map[string]string{"pod-name": "agent-orphan", "pod-uid": "uid-pod-orphan"}),
		"pod-node-uid":      agent(with("node-uid", "uid-node-old")),
		"peer-sa-gone":      peer("node-gone", "uid-x"),
		"peer-empty-suffix": peer("", "uid-x"),
		"peer-missing":      peer("node-c", "uid-sa-peer-c"),
		"peer-bad-key":      peer("node-bad", "uid-sa-peer-bad"),
		"peer-dup-key":      peer("node-m", "uid-sa-peer-m"),
		"stranger":          e.answer(static(saStatus("default", "stranger", "uid-sa-stranger", nil))),
		"user":              e.answer(static(user)),
		"prometheus":        e.answerToken(promSpec(e).sign(), static(saStatus("monitoring", "prometheus", "uid-sa-prom", nil))),
		"prom-invalid":      e.answerToken(promSpec(e).sign(), static(authnv1.TokenReviewStatus{Error: "token has expired"})),
		"audience":          e.answer(static(wrongAud)),
		"invalid":           e.answer(static(authnv1.TokenReviewStatus{Error: "token has expired"})),
		"aud-other":         e.answerToken(newTokenAud(e.clock.Now().Add(time.Hour), `"https://kubernetes.default.svc"`), static(rejected)),
		"aud-other-list":    e.answerToken(newTokenAud(e.clock.Now().Add(time.Hour), `["a","b"]`), static(rejected)),
		"aud-ours-rejected": e.answerToken(newTokenAud(e.clock.Now().Add(time.Hour), `["x","wirekube-relay"]`), static(rejected)),
		"aud-other-allowed": e.answerToken(newTokenAud(e.clock.Now().Add(time.Hour), `"https://kubernetes.default.svc"`), static(saStatus("wirekube-system", "wirekube-agent", agentSAUID, podA))),
		"api-error":         e.answer(func(string) (authnv1.TokenReviewStatus, error) { return authnv1.TokenReviewStatus{}, errFakeAPI }),
		"unknown":           newToken(e.clock.Now().Add(time.Hour)),
		"no-exp":            "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ0ZXN0In0.c2lnbmF0dXJlLXNpZ25hdHVyZQ",
	}
}

// forgedTokens are tokens local verification refuses; the fake API would
// accept each (a test fails if one reaches it and is allowed).
func (e *env) forgedTokens() map[string]string {
	podA := static(saStatus("wirekube-system", "wirekube-agent", agentSAUID,
		map[string]string{"pod-name": "agent-a", "pod-uid": podAUID, "node-name": "node-a", "node-uid": nodeAUID}))
	exp := e.clock.Now().Add(time.Hour)
	aud := []string{contract.DefaultAudience}
	out := map[string]string{}
	for name, tok := range verifyTokens(e.clock.Now()) {
		out[name] = e.answerToken(tok, podA)
	}
	out["exp-claim-only"] = e.answerToken(forgeExpOnly(exp), podA)
	later := fmt.Sprintf(`,"EXP":%d`, exp.Add(24*time.Hour).Unix())
	out["exp-case-variant"] = e.answerToken(signRaw(ambiguousPayload(exp, later)), podA)
	out["exp-repeated"] = e.answerToken(signRaw(ambiguousPayload(exp, strings.ToLower(later))), podA)
	out["sub-repeated"] = e.answerToken(signRaw(ambiguousPayload(exp, `,"sub":"system:serviceaccount:wirekube-system:wirekube-relay-peer-node-b"`)), podA)
	out["pod-name-case-variant"] = e.answerToken(signRaw(strings.Replace(ambiguousPayload(exp, ""),
		`"pod":{"name":"agent-a"`, `"pod":{"name":"agent-a","Name":"agent-b"`, 1)), podA)
	secret := agentSpec(e)
	secret.pod, secret.node, secret.secret = nil, nil, &ref{"relay-token", "uid-secret"}
	out["secret-bound"] = e.answerToken(secret.sign(), podA)
	out["unambiguous-raw"] = e.answerToken(signRaw(ambiguousPayload(exp, "")), podA)
	out["expired"] = e.answerToken(tokenSpec{aud: aud, exp: e.clock.Now().Add(-time.Second)}.sign(), podA)
	return out
}

type checkCase struct {
	name   string
	req    func(tok map[string]string) *authv3.CheckRequest
	reason contract.Reason // empty: allow
	peer   string
}

func checkCases() []checkCase {
	relay := func(id string) func(map[string]string) *authv3.CheckRequest {
		return func(tok map[string]string) *authv3.CheckRequest { return relayCheck(tok[id], nil) }
	}
	edited := func(id string, edit func(h map[string]string)) func(map[string]string) *authv3.CheckRequest {
		return func(tok map[string]string) *authv3.CheckRequest { return relayCheck(tok[id], edit) }
	}
	target := func(method, target, id string) func(map[string]string) *authv3.CheckRequest {
		return func(tok map[string]string) *authv3.CheckRequest { return checkRequest(method, target, tok[id], nil) }
	}
	targetWith := func(target string, withTok func(tok string) string) func(map[string]string) *authv3.CheckRequest {
		return func(tok map[string]string) *authv3.CheckRequest {
			return checkRequest("GET", withTok(tok["agent-pod"]), tok["agent-pod"], nil)
		}
	}
	return []checkCase{
		{name: "agent pod-bound token", req: relay("agent-pod"), peer: "node-a"},
		{name: "agent node-bound token", req: relay("agent-node"), peer: "node-a"},
		{name: "dedicated peer ServiceAccount", req: relay("peer-sa"), peer: "node-b"},
		{name: "allowed origin", req: edited("agent-pod", func(h map[string]string) { h["origin"] = "https://dash.example.com" }), peer: "node-a"},
		{name: "bearer scheme in lower case", req: edited("agent-pod", func(h map[string]string) {
			h["authorization"] = strings.Replace(h["authorization"], "Bearer", "bearer", 1)
		}), peer: "node-a"},
		{name: "no authorization header", req: relay("none"), reason: contract.ReasonTokenMissing},
		{name: "empty authorization header", req: edited("agent-pod", func(h map[string]string) { h["authorization"] = "" }), reason: contract.ReasonTokenMissing},
		{name: "bearer without token", req: edited("agent-pod", func(h map[string]string) { h["authorization"] = "Bearer " }), reason: contract.ReasonTokenMissing},
		{name: "basic scheme", req: edited("agent-pod", func(h map[string]string) { h["authorization"] = "Basic dXNlcjpwYXNz" }), reason: contract.ReasonTokenMalformed},
		{name: "not a JWT", req: edited("agent-pod", func(h map[string]string) { h["authorization"] = "Bearer abcdefghijklmnopqrstuvwxyz" }), reason: contract.ReasonTokenMalformed},
		{name: "JWT without exp", req: relay("no-exp"), reason: contract.ReasonTokenMalformed},
		{name: "oversized token", req: edited("agent-pod", func(h map[string]string) {
			h["authorization"] = "Bearer a." + strings.Repeat("b", MaxTokenLength) + ".c"
		}), reason: contract.ReasonTokenMalformed},
		{name: "repeated authorization joined by comma", req: edited("agent-pod", func(h map[string]string) {
			h["authorization"] += ",Bearer " + strings.TrimPrefix(h["authorization"], "Bearer ")
		}), reason: contract.ReasonAuthorizationRepeated},
		{name: "access_token in query", req: target("GET", "/relay?access_token=abc", "agent-pod"), reason: contract.ReasonTokenInURL},
		{name: "token in query beside a valid header", req: targetWith("", func(t string) string { return "/relay?token=" + t }), reason: contract.ReasonTokenInURL},
		{name: "JWT-shaped query value", req: targetWith("", func(t string) string { return "/relay?x=1&q=" + t }), reason: contract.ReasonTokenInURL},
		{name: "JWT in path", req: targetWith("", func(t string) string { return "/relay/" + t }), reason: contract.ReasonTokenInURL},
		{name: "token in URL without header", req: func(tok map[string]string) *authv3.CheckRequest {
			return checkRequest("GET", "/relay?access_token="+tok["agent-pod"], "", nil)
		}, reason: contract.ReasonTokenInURL},
		{name: "POST to relay", req: target("POST", "/relay", "agent-pod"), reason: contract.ReasonNotWebSocket},
		{name: "no upgrade header", req: edited("agent-pod", func(h map[string]string) { delete(h, "upgrade") }), reason: contract.ReasonNotWebSocket},
		{name: "upgrade h2c", req: edited("agent-pod", func(h map[string]string) { h["upgrade"] = "h2c" }), reason: contract.ReasonNotWebSocket},
		{name: "connection without upgrade", req: edited("agent-pod", func(h map[string]string) { h["connection"] = "keep-alive" }), reason: contract.ReasonNotWebSocket},
		{name: "request body", req: edited("agent-pod", func(h map[string]string) { h["content-length"] = "12" }), reason: contract.ReasonRequestBody},
		{name: "chunked body", req: edited("agent-pod", func(h map[string]string) { h["transfer-encoding"] = "chunked" }), reason: contract.ReasonRequestBody},
		{name: "other path", req: target("GET", "/admin", "agent-pod"), reason: contract.ReasonPathNotAllowed},
		{name: "dot segments", req: target("GET", "/metrics/../relay", "agent-pod"), reason: contract.ReasonPathNotAllowed},
		{name: "encoded slash", req: target("GET", "/metrics%2F..%2Frelay", "agent-pod"), reason: contract.ReasonPathNotAllowed},
		{name: "prefix without segment boundary", req: target("GET", "/metricsx", "prometheus"), reason: contract.ReasonPathNotAllowed},
		{name: "relay path with a suffix", req: target("GET", "/relay/x", "agent-pod"), reason: contract.ReasonPathNotAllowed},
		{name: "origin not allowed", req: edited("agent-pod", func(h map[string]string) { h["origin"] = "https://evil.example.com" }), reason: contract.ReasonOriginNotAllowed},
		{name: "invalid token", req: relay("invalid"), reason: contract.ReasonTokenInvalid},
		{name: "unknown token", req: relay("unknown"), reason: contract.ReasonTokenInvalid},
		{name: "audience mismatch", req: relay("audience"), reason: contract.ReasonAudienceMismatch},
		{name: "rejected, aud claim names another audience", req: relay("aud-other"), reason: contract.ReasonAudienceMismatch},
		{name: "rejected, aud claim list without ours", req: relay("aud-other-list"), reason: contract.ReasonAudienceMismatch},
		{name: "rejected, aud claim list with ours", req: relay("aud-ours-rejected"), reason: contract.ReasonTokenInvalid},
		{name: "aud claim of another audience denied before TokenReview", req: relay("aud-other-allowed"), reason: contract.ReasonAudienceMismatch},
		{name: "api error", req: relay("api-error"), reason: contract.ReasonReviewUnavailable},
		{name: "signed, exp and a later EXP claim", req: relay("exp-case-variant"), reason: contract.ReasonTokenMalformed},
		{name: "signed, exp claim twice", req: relay("exp-repeated"), reason: contract.ReasonTokenMalformed},
		{name: "signed, sub claim twice", req: relay("sub-repeated"), reason: contract.ReasonTokenMalformed},
		{name: "signed, pod name and Name", req: relay("pod-name-case-variant"), reason: contract.ReasonTokenMalformed},
		{name: "secret-bound token", req: relay("secret-bound"), reason: contract.ReasonTokenSecretBound},
		{name: "signed raw payload, unambiguous", req: relay("unambiguous-raw"), peer: "node-a"},
		{name: "forged: random signature, only an exp claim", req: relay("exp-claim-only"), reason: contract.ReasonTokenSignatureInvalid},
		{name: "forged: signed by another key, known kid", req: relay("other-key"), reason: contract.ReasonTokenSignatureInvalid},
		{name: "forged: signed by another key, unknown kid", req: relay("unknown-kid"), reason: contract.ReasonTokenSignatureInvalid},
		{name: "forged: no kid, no key verifies", req: relay("no-kid-other-key"), reason: contract.ReasonTokenSignatureInvalid},
		{name: "forged: alg none", req: relay("alg-none"), reason: contract.ReasonTokenSignatureInvalid},
		{name: "forged: HS256 keyed with the public key", req: relay("alg-hs256"), reason: contract.ReasonTokenSignatureInvalid},
		{name: "forged: claims changed after signing", req: relay("tampered"), reason: contract.ReasonTokenSignatureInvalid},
		{name: "valid signature, another issuer", req: relay("other-issuer"), reason: contract.ReasonTokenInvalid},
		{name: "valid signature, expired", req: relay("expired"), reason: contract.ReasonTokenInvalid},
		{name: "valid signature, not yet valid", req: relay("not-yet"), reason: contract.ReasonTokenInvalid},
		{name: "valid signature, no aud claim", req: relay("no-aud"), reason: contract.ReasonAudienceMismatch},
		{name: "valid signature without kid", req: relay("no-kid"), peer: "node-a"},
		{name: "unbound agent token", req: relay("agent-unbound"), reason: contract.ReasonTokenNotBound},
		{name: "bound pod missing", req: relay("pod-missing"), reason: contract.ReasonPodNotFound},
		{name: "bound pod uid differs", req: relay("pod-uid"), reason: contract.ReasonPodUIDMismatch},
		{name: "pod runs another ServiceAccount", req: relay("pod-sa"), reason: contract.ReasonPodServiceAccountMismatch},
		{name: "pod not scheduled", req: relay("pod-unscheduled"), reason: contract.ReasonPodNotScheduled},
		{name: "pod succeeded", req: relay("pod-succeeded"), reason: contract.ReasonPodTerminated},
		{name: "pod failed", req: relay("pod-failed"), reason: contract.ReasonPodTerminated},
		{name: "pod running", req: relay("pod-running"), peer: "node-a"},
		{name: "pod on another node", req: relay("pod-node"), reason: contract.ReasonNodeMismatch},
		{name: "node uid differs", req: relay("node-uid"), reason: contract.ReasonNodeMismatch},
		{name: "node missing", req: relay("node-missing"), reason: contract.ReasonNodeMismatch},
		{name: "pod-bound token, the pod's node deleted", req: relay("pod-node-gone"), reason: contract.ReasonNodeMismatch},
		{name: "pod-bound token naming no node, the pod's node deleted", req: relay("pod-node-gone-old"), reason: contract.ReasonNodeMismatch},
		{name: "pod-bound token, node uid differs", req: relay("pod-node-uid"), reason: contract.ReasonNodeMismatch},
		{name: "peer ServiceAccount, pod-bound token", req: relay("peer-pod"), peer: "node-b"},
		{name: "peer ServiceAccount, node-bound token", req: relay("peer-node"), peer: "node-b"},
		{name: "peer ServiceAccount, bound pod missing", req: relay("peer-pod-gone"), reason: contract.ReasonPodNotFound},
		{name: "peer ServiceAccount, bound pod uid differs", req: relay("peer-pod-uid"), reason: contract.ReasonPodUIDMismatch},
		{name: "peer ServiceAccount, pod runs another ServiceAccount", req: relay("peer-pod-sa"), reason: contract.ReasonPodServiceAccountMismatch},
		{name: "peer ServiceAccount, pod on another node", req: relay("peer-pod-node"), reason: contract.ReasonNodeMismatch},
		{name: "peer ServiceAccount, pod's node uid differs", req: relay("peer-pod-node-uid"), reason: contract.ReasonNodeMismatch},
		{name: "peer ServiceAccount, bound node missing", req: relay("peer-node-gone"), reason: contract.ReasonNodeMismatch},
		{name: "peer ServiceAccount uid differs", req: relay("peer-sa-uid"), reason: contract.ReasonServiceAccountNotFound},
		{name: "peer ServiceAccount deleted", req: relay("peer-sa-gone"), reason: contract.ReasonServiceAccountNotFound},
		{name: "peer prefix with empty suffix", req: relay("peer-empty-suffix"), reason: contract.ReasonIdentityNotAllowed},
		{name: "ServiceAccount not configured", req: relay("stranger"), reason: contract.ReasonIdentityNotAllowed},
		{name: "not a ServiceAccount", req: relay("user"), reason: contract.ReasonIdentityNotAllowed},
		{name: "WireKubePeer missing", req: relay("peer-missing"), reason: contract.ReasonPeerNotFound},
		{name: "WireKubePeer key of 31 bytes", req: relay("peer-bad-key"), reason: contract.ReasonPeerKeyInvalid},
		{name: "WireKubePeer key held by another WireKubePeer too", req: relay("peer-dup-key"), reason: contract.ReasonPeerKeyDuplicate},
		{name: "authn-only path, allowlisted", req: target("GET", "/metrics", "prometheus")},
		{name: "authn-only path below prefix, POST allowed", req: target("POST", "/metrics/x?y=1", "prometheus")},
		{name: "authn-only path, agent not allowlisted", req: target("GET", "/metrics", "agent-pod"), reason: contract.ReasonIdentityNotAllowed},
		{name: "authn-only path, invalid token", req: target("GET", "/metrics", "prom-invalid"), reason: contract.ReasonTokenInvalid},
		{name: "authn-only path, origin not allowed", req: func(tok map[string]string) *authv3.CheckRequest {
			return checkRequest("GET", "/metrics", tok["prometheus"], func(h map[string]string) { h["origin"] = "null" })
		}, reason: contract.ReasonOriginNotAllowed},
	}
}

func TestCheck(t *testing.T) {
	// The table's tokens are reviewed back to back: a burst that the review
	// rate (internal/reviewgate) must leave room for.
	e := newEnv(t, func(o *Options) { o.KubeAPIBurst = 1000 })
	tok := e.tokens()
	for k, v := range e.forgedTokens() {
		tok[k] = v
	}
	for _, tc := range checkCases() {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := e.srv.Check(fromLoopback(), tc.req(tok))
			if err != nil {
				t.Fatalf("Check returned an error (must answer with a CheckResponse): %v", err)
			}
			if tc.reason == "" {
				assertAllowed(t, resp, tc.peer, "2026-11-30T13:00:00Z")
				return
			}
			assertDenied(t, resp, tc.reason)
		})
	}
}

func assertAllowed(t *testing.T, resp *authv3.CheckResponse, peer, expires string) {
	t.Helper()
	if c := codes.Code(resp.GetStatus().GetCode()); c != codes.OK {
		t.Fatalf("status %v (%s), want OK", c, resp.GetStatus().GetMessage())
	}
	ok := resp.GetOkResponse()
	if ok == nil {
		t.Fatal("no OkResponse")
	}
	if got := ok.GetHeadersToRemove(); len(got) != 1 || got[0] != "authorization" {
		t.Errorf("headers_to_remove = %q, want [authorization]", got)
	}
	got := map[string]string{}
	for _, h := range ok.GetHeaders() {
		//lint:ignore SA1019 the deprecated field is what docs/spec.md#envoy requires to be set.
		if h.GetAppend() == nil || h.GetAppend().GetValue() {
			t.Errorf("header %s: append must be explicitly false", h.GetHeader().GetKey())
		}
		if h.GetAppendAction() != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
			t.Errorf("header %s: append_action %v", h.GetHeader().GetKey(), h.GetAppendAction())
		}
		got[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
	}
	if peer == "" {
		if len(got) != 1 || !strings.HasPrefix(got[contract.HeaderIdentity], "system:serviceaccount:monitoring:") {
			t.Errorf("authn-only allow headers = %v, want only %s", got, contract.HeaderIdentity)
		}
		return
	}
	want := map[string]string{
		contract.HeaderPeer:      peer,
		contract.HeaderPublicKey: fixtureKeys[peer],
	}
	if _, err := time.Parse(time.RFC3339, got[contract.HeaderTokenExpires]); err != nil || (expires != "" && got[contract.HeaderTokenExpires] != expires) {
		t.Errorf("%s = %q, want RFC 3339 %q", contract.HeaderTokenExpires, got[contract.HeaderTokenExpires], expires)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if got[contract.HeaderClientAddress] != fixtureSource {
		t.Errorf("%s = %q, want the request's source %s", contract.HeaderClientAddress, got[contract.HeaderClientAddress], fixtureSource)
	}
	if !strings.HasPrefix(got[contract.HeaderIdentity], "system:serviceaccount:wirekube-system:") || len(got) != len(contract.IdentityHeaders) {
		t.Errorf("identity headers = %v", got)
	}
	b, err := revocation.ParseBinding(got[contract.HeaderBinding])
	if err != nil || b.Peer != peer || b.Identity != got[contract.HeaderIdentity] {
		t.Errorf("%s = %q (%v), want a binding of peer %s", contract.HeaderBinding, got[contract.HeaderBinding], err, peer)
	}
}

func assertDenied(t *testing.T, resp *authv3.CheckResponse, reason contract.Reason) {
	t.Helper()
	d := resp.GetDeniedResponse()
	if d == nil {
		t.Fatalf("allowed (status %v), want deny %s", resp.GetStatus().GetCode(), reason)
	}
	hdr := map[string]string{}
	for _, h := range d.GetHeaders() {
		hdr[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
	}
	if got := contract.Reason(hdr[contract.HeaderDenyReason]); got != reason {
		t.Fatalf("reason %q, want %q", got, reason)
	}
	status := reason.HTTPStatus()
	if int(d.GetStatus().GetCode()) != status {
		t.Errorf("http status %d, want %d", d.GetStatus().GetCode(), status)
	}
	if want, ok := specGRPCCodes(t)[status]; !ok {
		t.Errorf("docs/spec.md names no gRPC code for HTTP status %d", status)
	} else if got := codes.Code(resp.GetStatus().GetCode()); got.String() != want {
		t.Errorf("grpc code %v, want %s (docs/spec.md)", got, want)
	}
	if (hdr["WWW-Authenticate"] == "Bearer") != (status == 401) {
		t.Errorf("WWW-Authenticate = %q with status %d", hdr["WWW-Authenticate"], status)
	}
	if hdr["Cache-Control"] != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", hdr["Cache-Control"])
	}
	if body := d.GetBody(); strings.Count(body, "\n") != 1 || !strings.Contains(body, string(reason)) {
		t.Errorf("body %q: want one line naming the reason", body)
	}
}

// specGRPCCodes reads the gRPC status.code of each deny status from
// docs/spec.md ("sets `status.code` to `INVALID_ARGUMENT` (400), ..."), so
// the expected codes are written down apart from grpcCode. The names are
// gRPC's canonical upper-case names; codes.Code.String spells them in
// CamelCase.
func specGRPCCodes(t *testing.T) map[int]string {
	t.Helper()
	out := map[int]string{}
	for st, name := range contractdoc.GRPCCodes(t) {
		camel := ""
		for _, w := range strings.Split(strings.ToLower(name), "_") {
			camel += strings.ToUpper(w[:1]) + w[1:]
		}
		out[st] = camel
	}
	return out
}
