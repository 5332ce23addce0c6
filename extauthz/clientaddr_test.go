package extauthz

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// TestClientAddress: the address an allow carries in
// X-WireKube-Client-Address and the check line logs is the
// X-Forwarded-For entry --trusted-hops from the right, else the
// connection's peer; an entry a client wrote further left is never
// recorded, and a value that is not an address is logged as "invalid",
// never as written.
func TestClientAddress(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hops     int
		http     bool
		xff      []string
		source   string // gRPC source address / HTTP RemoteAddr
		want     string // "" : no header, logged "unknown"
		wantLogs string
	}{
		{"envoy appended the peer after a forged entry", 0, false, []string{"6.6.6.6, 127.0.0.1"}, "127.0.0.1", "127.0.0.1", ""},
		{"one trusted load balancer", 1, false, []string{"6.6.6.6, 203.0.113.7, 10.0.0.5"}, "10.0.0.5", "203.0.113.7", ""},
		{"no header: the source address", 0, false, nil, "198.51.100.2", "198.51.100.2", ""},
		{"nothing at all", 0, false, nil, "", "", "unknown"},
		{"not an address", 0, false, []string{"<script>"}, "127.0.0.1", "invalid", ""},
		{"http: nginx set it alone", 0, true, []string{"203.0.113.9"}, "127.0.0.1:40000", "203.0.113.9", ""},
		{"http: forged lines before the front's", 0, true, []string{"6.6.6.6", "127.0.0.1"}, "127.0.0.1:40000", "127.0.0.1", ""},
		{"http: no header: the front's own address", 0, true, nil, "127.0.0.1:40000", "127.0.0.1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &testutil.SyncBuffer{}
			e := newEnvOpts(t, func(o *Options) { o.TrustedHops = tc.hops }, false, logs)
			tok := e.tokens()["agent-pod"]
			var got []string
			if tc.http {
				got = httpClientAddress(t, e, tok, tc.xff, tc.source)
			} else {
				got = grpcClientAddress(t, e, tok, tc.xff, tc.source)
			}
			want := []string{tc.want}
			logged := tc.want
			if tc.want == "" {
				want, logged = nil, tc.wantLogs
			}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("%s = %q, want %q", contract.HeaderClientAddress, got, want)
			}
			line := logLine(t, logs.String(), "check")
			testutil.Contains(t, line, `"client_address":"`+logged+`"`)
			if strings.Contains(logs.String(), "6.6.6.6") || strings.Contains(logs.String(), "<script>") {
				t.Errorf("a client-written X-Forwarded-For entry is in the log:\n%s", logs.String())
			}
		})
	}
}

func grpcClientAddress(t *testing.T, e *env, tok string, xff []string, source string) []string {
	t.Helper()
	req := relayCheck(tok, func(h map[string]string) {
		if xff != nil {
			h["x-forwarded-for"] = strings.Join(xff, ",")
		}
	})
	req.Attributes.Source = nil
	if source != "" {
		req.Attributes.Source = &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: source, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}}}}}
	}
	resp, _ := e.srv.Check(context.Background(), req)
	if resp.GetOkResponse() == nil {
		t.Fatalf("denied: %v", resp.GetDeniedResponse())
	}
	var got []string
	for _, h := range resp.GetOkResponse().GetHeaders() {
		if h.GetHeader().GetKey() == contract.HeaderClientAddress {
			got = append(got, h.GetHeader().GetValue())
		}
	}
	return got
}

func httpClientAddress(t *testing.T, e *env, tok string, xff []string, remote string) []string {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set("X-Original-Uri", "/relay")
	r.Header.Set("X-Original-Method", "GET")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Connection", "upgrade")
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	w := httptest.NewRecorder()
	(&HTTPHandler{Authorizer: e.authz}).ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d (%s)", w.Code, w.Header().Get(contract.HeaderDenyReason))
	}
	return w.Header().Values(contract.HeaderClientAddress)
}

// TestTrustedHopsFlag: --trusted-hops takes 0 to 8; anything else is an
// error naming the flag.
func TestTrustedHopsFlag(t *testing.T) {
	for _, tc := range []struct {
		hops int
		ok   bool
	}{{0, true}, {8, true}, {-1, false}, {9, false}} {
		o := testOptions()
		o.TrustedHops = tc.hops
		err := o.Validate()
		if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "--trusted-hops")) {
			t.Errorf("--trusted-hops=%d: Validate() = %v, want ok=%v", tc.hops, err, tc.ok)
		}
	}
}
