//go:build e2e

package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// peerSeenWithin bounds how long extauthz's WireKubePeer informer may take
// to see a peer the test just created (a watch event: milliseconds).
const peerSeenWithin = 10 * time.Second

// waitPeerSeen returns once extauthz's informers know the WireKubePeer of
// id: an upgrade dialled right after CreatePeer could otherwise race the
// watch event and get 403 peer_not_found. It asks extauthz's HTTP front
// directly, as nginx's auth_request would, with a throwaway token of the
// same ServiceAccount and bound object, so id's own token stays unreviewed
// and uncached (several scenarios depend on that) and no front, bridge or
// relay sees the request.
func (e *env) waitPeerSeen(t *testing.T, id identity, sa string, o stack.TokenOptions) {
	t.Helper()
	probe := e.tokenFor(t, stack.Namespace, sa, o)
	var status int
	var reason string
	testutil.EventuallyWithin(t, peerSeenWithin, "extauthz to see WireKubePeer "+id.peer, func() bool {
		status, reason = e.askExtauthz(t, probe)
		return reason != string(contract.ReasonPeerNotFound)
	})
	if status == 0 {
		t.Fatalf("extauthz unreachable while waiting for WireKubePeer %s", id.peer)
	}
}

// askExtauthz sends one auth subrequest for an upgrade of /relay with
// token and returns extauthz's status and deny reason (0 and "" when it
// could not be asked).
func (e *env) askExtauthz(t *testing.T, token string) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(e.relayAuthRequest(t, token))
	if err != nil {
		return 0, ""
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get(contract.HeaderDenyReason)
}

// relayAuthRequest is the auth subrequest nginx's auth_request sends to
// extauthz's HTTP front for an upgrade of /relay with token.
func (e *env) relayAuthRequest(t *testing.T, token string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+e.stack.ExtauthzHTTP+"/auth", nil)
	fatalIf(t, err)
	req.Header.Set("X-Original-Method", http.MethodGet)
	req.Header.Set("X-Original-URI", "/relay")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Sec-WebSocket-Protocol", contract.Subprotocol)
	req.Header.Set("Authorization", "Bearer "+token)
	return req
}
