package envoystandin

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

func TestBridgeClusterRetriesAnotherEndpoint(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	upAddr := up.Listener.Addr().String()
	c := newBridgeCluster([]string{testutil.ClosedAddr(t), upAddr})
	for i := range 4 { // round robin starts on each endpoint in turn
		conn, err := c.dial(context.Background(), "tcp", "bridge:80")
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		if got := conn.RemoteAddr().String(); got != upAddr {
			t.Fatalf("dial %d reached %s, want %s", i, got, upAddr)
		}
		conn.Close()
	}
}

func TestNoBridgeAnswers503BridgeUnavailable(t *testing.T) {
	s, err := New(Options{TLS: &tls.Config{}, ExtauthzGRPC: testutil.ClosedAddr(t), Bridge: testutil.ClosedAddr(t),
		ExtraBridges: []string{testutil.ClosedAddr(t)}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.conn.Close()
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get(contract.HeaderDenyReason) != string(contract.ReasonBridgeUnavailable) {
		t.Fatalf("got %d %q, want 503 bridge_unavailable", w.Code, w.Header().Get(contract.HeaderDenyReason))
	}
	// The headers_to_add of envoy.yaml's mapper.
	if w.Header().Get("Cache-Control") != "no-store" || w.Header().Get("Retry-After") != "1" {
		t.Errorf("Cache-Control %q, Retry-After %q; want no-store, 1", w.Header().Get("Cache-Control"), w.Header().Get("Retry-After"))
	}
}
