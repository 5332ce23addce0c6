package envoystandin

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// secret stands in for a token a client put somewhere it does not belong.
const secret = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXRva2VuLWJvZHk.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"

func newLoggingServer(t *testing.T, access io.Writer) *Server {
	t.Helper()
	s, err := New(Options{TLS: &tls.Config{}, ExtauthzGRPC: testutil.ClosedAddr(t), Bridge: testutil.ClosedAddr(t),
		Logger: slog.New(slog.DiscardHandler), AccessLog: access})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.conn.Close() })
	return s
}

// TestAccessLogFollowsEnvoyConfig: the stand-in's access log line has exactly
// the fields of envoy.yaml's format, logs the route name, and holds no token
// put in the path, the query, the Host, a cookie, the User-Agent or an extra
// Authorization header.
func TestAccessLogFollowsEnvoyConfig(t *testing.T) {
	b, err := envoyconfig.Load("../../../envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	format, err := envoyconfig.AccessLogFormat(b, "relay_tls")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	s := newLoggingServer(t, &buf)
	for _, tt := range []struct{ target, route, status string }{
		{"/relay/" + secret + "?access_token=" + secret, "not_found", "404"},
		{"/relay?access_token=" + secret, "relay", "503"}, // extauthz unreachable
	} {
		buf.Reset()
		r := httptest.NewRequest(http.MethodGet, "https://relay.example.com"+tt.target, nil)
		r.Host = secret + ".example.com"
		r.Header.Add("Authorization", "Bearer "+secret)
		r.Header.Add("Authorization", "Bearer "+secret)
		r.Header.Set("Cookie", "token="+secret)
		r.Header.Set("User-Agent", secret)
		r.Header.Set("X-Request-Id", secret)
		s.ServeHTTP(httptest.NewRecorder(), r)
		var line map[string]string
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
			t.Fatalf("%s: access log %q: %v", tt.target, buf.String(), err)
		}
		if got, want := slices.Sorted(maps.Keys(line)), slices.Sorted(maps.Keys(format)); !slices.Equal(got, want) {
			t.Errorf("fields %v, want envoy.yaml's %v", got, want)
		}
		if line["route"] != tt.route || line["status"] != tt.status || line["method"] != "GET" {
			t.Errorf("%s: logged %v", tt.target, line)
		}
		if strings.Contains(buf.String(), secret[len(secret)-20:]) {
			t.Errorf("%s: access log holds the token: %s", tt.target, buf.String())
		}
	}
}

// TestAccessLogCommands: the command operators are evaluated as Envoy does,
// so a path or header added to the shipped format would be logged by the
// stand-in too (and found by the e2e suite's log scan).
func TestAccessLogCommands(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "https://relay.example.com/a/b?q=1", nil)
	r.Header.Set("X-Request-Id", "0123456789abcdef")
	x := &exchange{req: r, route: "relay", rec: &recorder{ResponseWriter: httptest.NewRecorder()}}
	x.rec.Header().Set("X-WireKube-Deny-Reason", "token_missing")
	x.rec.WriteHeader(http.StatusUnauthorized)
	for f, want := range map[string]string{
		"%REQ(:PATH)%":                   "/a/b?q=1",
		"%REQ(X-MISSING?:METHOD)%":       "POST",
		"%REQ(X-REQUEST-ID):8%":          "01234567",
		"%REQ(:AUTHORITY)%":              "relay.example.com",
		"%REQ(X-ABSENT)%":                "-",
		"%ROUTE_NAME%":                   "relay",
		"%RESPONSE_CODE%":                "401",
		"%RESP(X-WIREKUBE-DENY-REASON)%": "token_missing",
		"%NOT_A_COMMAND%":                "-",
		"a %RESPONSE_CODE% b":            "a 401 b",
	} {
		if got := commandRE.ReplaceAllStringFunc(f, x.command); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
}
