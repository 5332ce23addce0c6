package extauthz

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// TestCheckLogsFrontRequestID: the check line carries the front's request
// id (gRPC: attributes.request.http.id, else the x-request-id header; HTTP:
// X-Request-Id), and a value no front generates is logged as [invalid],
// never as sent.
func TestCheckLogsFrontRequestID(t *testing.T) {
	const envoyID = "f2b6c3f0-0000-4000-8000-0000000000aa"
	for _, tc := range []struct {
		name string
		run  func(e *env, tok string)
		want string
	}{
		{"grpc id field", func(e *env, tok string) {
			in := relayCheck(tok, nil)
			in.Attributes.Request.Http.Id = envoyID
			e.authz.Decide(context.Background(), requestFromCheck(in))
		}, `"request_id":"` + envoyID + `"`},
		{"grpc x-request-id header when id is empty", func(e *env, tok string) {
			in := relayCheck(tok, func(h map[string]string) { h["x-request-id"] = envoyID })
			in.Attributes.Request.Http.Id = ""
			e.authz.Decide(context.Background(), requestFromCheck(in))
		}, `"request_id":"` + envoyID + `"`},
		{"grpc id with a space", func(e *env, tok string) {
			in := relayCheck(tok, nil)
			in.Attributes.Request.Http.Id = "Bearer " + tok
			e.authz.Decide(context.Background(), requestFromCheck(in))
		}, `"request_id":"[invalid]"`},
		{"http X-Request-Id of nginx", func(e *env, tok string) {
			httpCheck(t, e, tok, "0f6c1d2e3a4b5c6d7e8f90a1b2c3d4e5")
		}, `"request_id":"0f6c1d2e3a4b5c6d7e8f90a1b2c3d4e5"`},
		{"http X-Request-Id too long", func(e *env, tok string) {
			httpCheck(t, e, tok, strings.Repeat("a", 65))
		}, `"request_id":"[invalid]"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &testutil.SyncBuffer{}
			e := newEnvLogging(t, logs)
			tok := e.tokens()["agent-pod"]
			tc.run(e, tok)
			line := logLine(t, logs.String(), "check")
			testutil.Contains(t, line, tc.want, `"peer":"node-a"`)
			if strings.Contains(logs.String(), tok) {
				t.Errorf("the token is in the log:\n%s", logs.String())
			}
		})
	}
}

func httpCheck(t *testing.T, e *env, tok, requestID string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set("X-Original-Uri", "/relay")
	r.Header.Set("X-Original-Method", "GET")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Connection", "upgrade")
	r.Header.Set("X-Request-Id", requestID)
	w := httptest.NewRecorder()
	(&HTTPHandler{Authorizer: e.authz}).ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d (%s)", w.Code, w.Header().Get("X-WireKube-Deny-Reason"))
	}
}

// TestRefusedTokenLogsClaimedNode: a token TokenReview refuses after its
// signature verified is logged with the node its claims name, so the
// refusal is found by node name; a token without a node claim logs none.
func TestRefusedTokenLogsClaimedNode(t *testing.T) {
	for _, tc := range []struct {
		name string
		node *ref
		want string
	}{
		{"node claim", &ref{Name: "node-gone", UID: "uid-1"}, `"claimed_node":"node-gone"`},
		{"no node claim", nil, `"claimed_node":""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &testutil.SyncBuffer{}
			e := newEnvLogging(t, logs)
			tok := tokenSpec{aud: []string{"wirekube-relay"}, exp: e.clock.Now().Add(time.Hour), node: tc.node}.sign()
			// The fake API answers an unknown token "invalid bearer token".
			wantReason(t, e.check(t, tok), contract.ReasonTokenInvalid)
			testutil.Contains(t, logLine(t, logs.String(), "check"), tc.want, `"reason":"token_invalid"`)
		})
	}
}
