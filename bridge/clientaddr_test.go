package bridge

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// TestClientAddressShown: the client address extauthz signed is what the
// session start line and /debug/sessions show; without one they show
// "unknown"; extauthz's signed "unverified" (no trusted front named the
// client) is shown as such, not as "invalid"; a repeated header is refused as a misconfigured proxy; a deny
// line written before the signature verified shows "unverified", never the
// header's value.
func TestClientAddressShown(t *testing.T) {
	key := testutil.SigningKey(1)
	h := startBridge(t, func(o *Options) { o.IdentityKeysFile = testutil.PublishKeys(t, key); withSessions(o) })
	k1, k2, k3, k4 := testKey(1), testKey(2), testKey(3), testKey(4)

	h.registeredAs(t, testutil.SignHeaders(withAddr(identity(k1), "203.0.113.7"), key, time.Now()), k1)
	h2 := identity(k2)
	h2.Set(contract.HeaderPeer, "node-b")
	h.registeredAs(t, testutil.SignHeaders(h2, key, time.Now()), k2)
	h3 := withAddr(identity(k3), "<b>node")
	h3.Set(contract.HeaderPeer, "node-c")
	h.registeredAs(t, testutil.SignHeaders(h3, key, time.Now()), k3)
	h4 := withAddr(identity(k4), "unverified")
	h4.Set(contract.HeaderPeer, "node-d")
	h.registeredAs(t, testutil.SignHeaders(h4, key, time.Now()), k4)
	_, body, l := getSessions(t, h, "")
	got := map[string]string{}
	for _, s := range l.Sessions {
		got[s.Peer] = s.ClientAddress
	}
	if got["node-a"] != "203.0.113.7" || got["node-b"] != "unknown" || got["node-c"] != "invalid" || got["node-d"] != "unverified" {
		t.Fatalf("client addresses %v, want node-a 203.0.113.7, node-b unknown, node-c invalid, node-d unverified (listing %s)", got, body)
	}
	if !containsAll(h.logs.String(), `"msg":"session started"`, `"client_address":"203.0.113.7"`) {
		t.Errorf("the session start line lacks the client address: %s", h.logs)
	}

	repeated := testutil.SignHeaders(withAddr(identity(k1), "203.0.113.7"), key, time.Now())
	repeated.Add(contract.HeaderClientAddress, "203.0.113.7")
	refusedWith(t, h.url, repeated, contract.ReasonIdentityHeaderInvalid)

	forged := withAddr(identity(k1), "192.0.2.66")
	refusedWith(t, h.url, forged, contract.ReasonIdentitySignatureMissing)
	var denyLine string
	for line := range strings.Lines(h.logs.String()) {
		if strings.Contains(line, string(contract.ReasonIdentitySignatureMissing)) {
			denyLine = line
		}
	}
	if !strings.Contains(denyLine, `"client_address":"unverified"`) || strings.Contains(h.logs.String(), "192.0.2.66") ||
		strings.Contains(h.logs.String(), "<b>node") {
		t.Errorf("unsigned deny line %q: want client_address unverified and no trace of the unsigned value", denyLine)
	}
}

// withAddr sets X-WireKube-Client-Address on hdr.
func withAddr(hdr http.Header, addr string) http.Header {
	hdr.Set(contract.HeaderClientAddress, addr)
	return hdr
}

// TestClientAddressOnDenyAfterSignature: a refusal decided after the
// signature verified (here a subprotocol the bridge does not speak) logs
// the signed client address, not "unverified".
func TestClientAddressOnDenyAfterSignature(t *testing.T) {
	key := testutil.SigningKey(1)
	o := testOptions("127.0.0.1:1")
	o.IdentityKeysFile = testutil.PublishKeys(t, key)
	logs := &testutil.SyncBuffer{}
	srv := mustNew(t, o, logs, prometheus.NewRegistry())
	r := upgradeRequest()
	for k, v := range testutil.SignHeaders(withAddr(identity(testKey(1)), "203.0.113.7"), key, time.Now()) {
		r.Header[k] = v
	}
	r.Header.Set("Sec-WebSocket-Protocol", "chat")
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, r)
	if got := w.Header().Get(contract.HeaderDenyReason); got != string(contract.ReasonSubprotocol) {
		t.Fatalf("deny reason %q, want %s", got, contract.ReasonSubprotocol)
	}
	if !containsAll(logs.String(), `"msg":"request denied"`, `"client_address":"203.0.113.7"`) {
		t.Errorf("the deny line lacks the signed client address: %s", logs)
	}
}
