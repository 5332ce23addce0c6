package bridge

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// upgradeRequest is a valid upgrade as the proxy forwards it.
func upgradeRequest() *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/relay", nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Version", "13")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	r.Header.Set("Sec-WebSocket-Protocol", contract.Subprotocol)
	for k, v := range identity(testKey(1)) {
		r.Header[k] = v
	}
	return r
}

func TestDeniedBeforeUpgrade(t *testing.T) {
	tests := []struct {
		name   string
		mod    func(r *http.Request)
		reason contract.Reason
	}{
		// As extauthz answers them (docs/spec.md: not a GET upgrade).
		{"post", func(r *http.Request) { r.Method = http.MethodPost }, contract.ReasonNotWebSocket},
		{"head", func(r *http.Request) { r.Method = http.MethodHead }, contract.ReasonNotWebSocket},
		{"put", func(r *http.Request) { r.Method = http.MethodPut }, contract.ReasonNotWebSocket},
		{"body", func(r *http.Request) { r.ContentLength = 3; r.Body = http.NoBody }, contract.ReasonRequestBody},
		{"chunked body", func(r *http.Request) { r.ContentLength = -1; r.TransferEncoding = []string{"chunked"} }, contract.ReasonRequestBody},
		{"plain get", func(r *http.Request) { r.Header.Del("Upgrade"); r.Header.Del("Connection") }, contract.ReasonNotWebSocket},
		{"old version", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Version", "8") }, contract.ReasonNotWebSocket},
		{"no ws key", func(r *http.Request) { r.Header.Del("Sec-WebSocket-Key") }, contract.ReasonNotWebSocket},
		{"other subprotocol only", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Protocol", "chat, mqtt") }, contract.ReasonSubprotocol},
		// A Kubernetes-style client offers its bearer token as a subprotocol:
		// the log must not quote it (the check below greps for it).
		{"token offered as a subprotocol", func(r *http.Request) {
			r.Header.Set("Sec-WebSocket-Protocol", "base64url.bearer.authorization.k8s.io.secret-token-value, chat")
		}, contract.ReasonSubprotocol},
		{"origin not listed", func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, contract.ReasonOriginNotAllowed},
		{"origin repeated", func(r *http.Request) {
			r.Header.Add("Origin", "https://ok.example")
			r.Header.Add("Origin", "https://evil.example")
		}, contract.ReasonOriginNotAllowed},
		{"peer missing", func(r *http.Request) { r.Header.Del(contract.HeaderPeer) }, contract.ReasonIdentityHeaderInvalid},
		{"key missing", func(r *http.Request) { r.Header.Del(contract.HeaderPublicKey) }, contract.ReasonIdentityHeaderInvalid},
		{"identity missing", func(r *http.Request) { r.Header.Del(contract.HeaderIdentity) }, contract.ReasonIdentityHeaderInvalid},
		{"expiry missing", func(r *http.Request) { r.Header.Del(contract.HeaderTokenExpires) }, contract.ReasonIdentityHeaderInvalid},
		{"peer repeated", func(r *http.Request) { r.Header.Add(contract.HeaderPeer, "node-b") }, contract.ReasonIdentityHeaderInvalid},
		{"key repeated", func(r *http.Request) { r.Header.Add(contract.HeaderPublicKey, testKey(2).Base64()) }, contract.ReasonIdentityHeaderInvalid},
		{"key 31 bytes", func(r *http.Request) {
			r.Header.Set(contract.HeaderPublicKey, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==")
		}, contract.ReasonIdentityHeaderInvalid},
		{"key not base64", func(r *http.Request) {
			r.Header.Set(contract.HeaderPublicKey, strings.Repeat("!", 44))
		}, contract.ReasonIdentityHeaderInvalid},
		{"key url base64", func(r *http.Request) {
			r.Header.Set(contract.HeaderPublicKey, "-_-_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
		}, contract.ReasonIdentityHeaderInvalid},
		{"expiry not rfc3339", func(r *http.Request) {
			r.Header.Set(contract.HeaderTokenExpires, "1700000000")
		}, contract.ReasonIdentityHeaderInvalid},
		{"peer empty", func(r *http.Request) { r.Header.Set(contract.HeaderPeer, "") }, contract.ReasonIdentityHeaderInvalid},
		{"identity with space", func(r *http.Request) { r.Header.Set(contract.HeaderIdentity, "a b") }, contract.ReasonIdentityHeaderInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions("127.0.0.1:1")
			o.AllowedOrigins = []string{"https://ok.example"}
			logs := &testutil.SyncBuffer{}
			reg := prometheus.NewRegistry()
			srv := mustNew(t, o, logs, reg)
			r := upgradeRequest()
			r.Header.Set("Authorization", "Bearer secret-token-value")
			tt.mod(r)
			w := httptest.NewRecorder()
			srv.Handler().ServeHTTP(w, r)
			if w.Code != tt.reason.HTTPStatus() || w.Header().Get(contract.HeaderDenyReason) != string(tt.reason) {
				t.Fatalf("got %d %q, want %d %q", w.Code, w.Header().Get(contract.HeaderDenyReason),
					tt.reason.HTTPStatus(), tt.reason)
			}
			if got := promtest.ToFloat64(srv.metrics.rejects.WithLabelValues(string(tt.reason))); got != 1 {
				t.Errorf("rejects_total{reason=%q} = %v, want 1", tt.reason, got)
			}
			wantLevel := `"level":"INFO"`
			if tt.reason == contract.ReasonIdentityHeaderInvalid {
				wantLevel = `"level":"ERROR"`
			}
			if !containsAll(logs.String(), wantLevel, `"reason":"`+string(tt.reason)+`"`) {
				t.Errorf("log lacks %s and the reason: %s", wantLevel, logs)
			}
			if strings.Contains(logs.String(), "secret-token-value") || strings.Contains(logs.String(), testKey(1).Base64()) {
				t.Errorf("log leaks the token or the key: %s", logs)
			}
		})
	}
}

func TestUpgradeSelectsSubprotocolAndAllowedOrigin(t *testing.T) {
	tests := []struct {
		name    string
		offer   []string
		origin  string
		wantSub string
	}{
		{"offered alone", []string{contract.Subprotocol}, "", contract.Subprotocol},
		{"offered among others", []string{"chat", contract.Subprotocol}, "", contract.Subprotocol},
		{"none offered", nil, "", ""},
		{"listed origin", []string{contract.Subprotocol}, "https://ok.example", contract.Subprotocol},
	}
	h := startBridge(t, func(o *Options) { o.AllowedOrigins = []string{"https://ok.example"} })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := identity(testKey(1))
			if tt.origin != "" {
				hdr.Set("Origin", tt.origin)
			}
			d := websocket.Dialer{Subprotocols: tt.offer}
			ws, resp, err := d.Dial(h.url, hdr)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer ws.Close()
			if resp.StatusCode != http.StatusSwitchingProtocols || ws.Subprotocol() != tt.wantSub {
				t.Fatalf("status %d subprotocol %q, want 101 %q", resp.StatusCode, ws.Subprotocol(), tt.wantSub)
			}
		})
	}
}

func mustNew(t *testing.T, o Options, logs *testutil.SyncBuffer, reg *prometheus.Registry) *Server {
	t.Helper()
	srv, err := newFromOptions(o, newTestLogger(logs), reg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return srv
}
