package bridge

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

const nginxRequestID = "0f6c1d2e3a4b5c6d7e8f90a1b2c3d4e5"

// logLineWith returns the first log line holding msg and every one of subs.
func logLineWith(logs, msg string, subs ...string) string {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"msg":"`+msg+`"`) && containsAll(l, subs...) {
			return l
		}
	}
	return ""
}

// TestDenyLogNamesPeerAndRequestID: a deny line names the peer and
// identity whenever the proxy's identity headers are valid (also for a
// check that runs before them), and always the front's request id; an id
// no front generates is logged as [invalid].
func TestDenyLogNamesPeerAndRequestID(t *testing.T) {
	peer, ident := `"peer":"node-a"`, `"identity":"system:serviceaccount:wirekube-system:wirekube-agent"`
	for _, tc := range []struct {
		name      string
		request   func(hdr http.Header) *http.Request
		requestID string
		want      []string
	}{
		{"subprotocol after the identity", func(hdr http.Header) *http.Request {
			hdr.Set("Sec-WebSocket-Protocol", "other")
			return upgradeRequestWith(hdr)
		}, nginxRequestID, []string{`"reason":"subprotocol_unsupported"`, peer, ident, `"request_id":"` + nginxRequestID + `"`}},
		{"not an upgrade, identity valid", func(hdr http.Header) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, "", nil)
			r.Header = hdr
			return r
		}, nginxRequestID, []string{`"reason":"not_websocket"`, peer, ident, `"request_id":"` + nginxRequestID + `"`}},
		{"identity headers invalid", func(hdr http.Header) *http.Request {
			hdr.Del(contract.HeaderPublicKey)
			return upgradeRequestWith(hdr)
		}, nginxRequestID, []string{`"reason":"identity_header_invalid"`, `"peer":""`, `"request_id":"` + nginxRequestID + `"`}},
		{"request id with a space", func(hdr http.Header) *http.Request {
			hdr.Set("Sec-WebSocket-Protocol", "other")
			return upgradeRequestWith(hdr)
		}, "Bearer secret", []string{`"reason":"subprotocol_unsupported"`, peer, `"request_id":"[invalid]"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startBridge(t, nil)
			hdr := identity(testKey(1))
			hdr.Set(contract.HeaderRequestID, tc.requestID)
			r := tc.request(hdr)
			r.URL, _ = r.URL.Parse(h.base + "/relay")
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if line := logLineWith(h.logs.String(), "request denied", tc.want...); line == "" {
				t.Fatalf("no deny line with %q in:\n%s", tc.want, h.logs.String())
			}
			if strings.Contains(h.logs.String(), "secret") {
				t.Errorf("the client's request id is in the log:\n%s", h.logs.String())
			}
		})
	}
}

func upgradeRequestWith(hdr http.Header) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "", nil)
	r.Header = hdr
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Version", "13")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	return r
}

// TestSessionLogCarriesRequestID: a session closed after the upgrade (key
// mismatch) is logged with the request id of its upgrade.
func TestSessionLogCarriesRequestID(t *testing.T) {
	h := startBridge(t, nil)
	hdr := identity(testKey(1))
	hdr.Set(contract.HeaderRequestID, nginxRequestID)
	ws := h.dial(t, hdr)
	send(t, ws, relayproto.AppendRegister(nil, testKey(2)))
	expectClose(t, ws, websocket.ClosePolicyViolation, contract.CloseRegisterKeyMismatch)
	testutil.Eventually(t, "session ended line", func() bool {
		return logLineWith(h.logs.String(), "session ended", `"peer":"node-a"`,
			`"close_reason":"register_key_mismatch"`, `"request_id":"`+nginxRequestID+`"`) != ""
	})
}
