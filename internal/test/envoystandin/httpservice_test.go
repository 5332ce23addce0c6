package envoystandin

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
)

// TestHTTPService: the http_service variant sends the original method and
// path with only the allowed client headers, copies an allow answer's
// identity headers (and honours x-envoy-auth-headers-to-remove), and relays
// a deny's status, allowed headers and body.
func TestHTTPService(t *testing.T) {
	var authReq *http.Request
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authReq = r.Clone(r.Context())
		if r.Header.Get("Authorization") != "Bearer good" {
			w.Header().Set(contract.HeaderDenyReason, "token_invalid")
			w.Header().Set("WWW-Authenticate", "Bearer")
			w.Header().Set("X-Not-Allowed", "x")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, "denied: token_invalid\n")
			return
		}
		w.Header().Set(contract.HeaderPeer, "node-a")
		w.Header().Set("X-Envoy-Auth-Headers-To-Remove", "authorization, x-extra")
	}))
	defer auth.Close()
	var upstream http.Header
	bridge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstream = r.Header.Clone()
	}))
	defer bridge.Close()
	_, err := New(Options{TLS: nil, ExtauthzHTTP: hostPort(t, auth.URL), Bridge: hostPort(t, bridge.URL),
		Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		t.Fatal("New without TLS succeeded")
	}
	s, err := New(Options{TLS: &tls.Config{}, ExtauthzHTTP: hostPort(t, auth.URL), Bridge: hostPort(t, bridge.URL),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}

	req := httptest.NewRequest(http.MethodGet, "/relay?x=1", nil)
	req.Header.Set("Authorization", "Bearer good")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("X-Extra", "drop-me")
	req.Header.Set("Cookie", "not-for-auth")
	req.Header.Set(contract.HeaderPeer, "spoofed")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if authReq.Method != http.MethodGet || authReq.URL.RequestURI() != "/relay?x=1" ||
		authReq.Header.Get("Upgrade") != "websocket" || authReq.Header.Get("Cookie") != "" ||
		authReq.Header.Get(contract.HeaderPeer) != "" {
		t.Errorf("auth request %s %s %v", authReq.Method, authReq.URL, authReq.Header)
	}
	if upstream.Get(contract.HeaderPeer) != "node-a" || upstream.Get("Authorization") != "" || upstream.Get("X-Extra") != "" {
		t.Errorf("upstream headers %v", upstream)
	}

	req = httptest.NewRequest(http.MethodGet, "/relay", nil)
	req.Header.Set("Authorization", "Bearer bad")
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || rec.Header().Get(contract.HeaderDenyReason) != "token_invalid" ||
		rec.Header().Get("WWW-Authenticate") != "Bearer" || rec.Header().Get("X-Not-Allowed") != "" ||
		!strings.Contains(rec.Body.String(), "token_invalid") {
		t.Errorf("deny: %d %v %q", rec.Code, rec.Header(), rec.Body.String())
	}
}

func hostPort(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Host
}
