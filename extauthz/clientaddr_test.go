package extauthz

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/peer"

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
	return grpcClientAddressFrom(t, fromLoopback(), e, tok, xff, source)
}

// grpcClientAddressFrom is grpcClientAddress for a check that came on
// ctx's connection.
func grpcClientAddressFrom(t *testing.T, ctx context.Context, e *env, tok string, xff []string, source string) []string {
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
	resp, _ := e.srv.Check(ctx, req)
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
	return httpClientAddressOn(t, nil, e, tok, xff, remote)
}

// httpClientAddressOn is httpClientAddress for a listener whose local
// address is local (nil: TCP, as httptest's).
func httpClientAddressOn(t *testing.T, local net.Addr, e *env, tok string, xff []string, remote string) []string {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if local != nil {
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, local))
	}
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

// fromLoopback is the context of a gRPC check that came on a loopback
// connection, as Envoy's in the Pod does.
func fromLoopback() context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}})
}

// TestClientAddressOnlyFromTrustedFronts: where a client reaches extauthz
// itself (extauthz's port on the Pod address), what it writes into
// X-Forwarded-For or a CheckRequest's source address is never recorded:
// a check whose connection is not from --trusted-proxies (default
// loopback) or a Unix socket is answered and logged "unverified", signed
// like any other value; a front named in --trusted-proxies is read as
// before.
func TestClientAddressOnlyFromTrustedFronts(t *testing.T) {
	podPeer := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 5000}})
	forged := []string{"6.6.6.6"}
	for _, tc := range []struct {
		name    string
		proxies string // --trusted-proxies; "" keeps the default
		ask     func(t *testing.T, e *env, tok string) []string
		want    string
	}{
		{"grpc from a Pod address", "", func(t *testing.T, e *env, tok string) []string {
			return grpcClientAddressFrom(t, podPeer, e, tok, forged, "6.6.6.6")
		}, "unverified"},
		{"grpc without a peer", "", func(t *testing.T, e *env, tok string) []string {
			return grpcClientAddressFrom(t, context.Background(), e, tok, forged, "6.6.6.6")
		}, "unverified"},
		{"http from a Pod address", "", func(t *testing.T, e *env, tok string) []string {
			return httpClientAddress(t, e, tok, forged, "10.0.0.9:5000")
		}, "unverified"},
		{"http over a Unix socket", "", func(t *testing.T, e *env, tok string) []string {
			return httpClientAddressOn(t, &net.UnixAddr{Name: "/run/x.sock", Net: "unix"}, e, tok, []string{"203.0.113.9"}, "@")
		}, "203.0.113.9"},
		{"http from a named proxy range", "10.0.0.0/24", func(t *testing.T, e *env, tok string) []string {
			return httpClientAddress(t, e, tok, []string{"203.0.113.9"}, "10.0.0.9:5000")
		}, "203.0.113.9"},
		{"loopback not named any more", "10.0.0.0/24", func(t *testing.T, e *env, tok string) []string {
			return httpClientAddress(t, e, tok, forged, "127.0.0.1:40000")
		}, "unverified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &testutil.SyncBuffer{}
			e := newEnvOpts(t, func(o *Options) {
				if tc.proxies != "" {
					o.TrustedProxies = tc.proxies
				}
			}, false, logs)
			got := tc.ask(t, e, e.tokens()["agent-pod"])
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("%s = %q, want [%q]", contract.HeaderClientAddress, got, tc.want)
			}
			testutil.Contains(t, logLine(t, logs.String(), "check"), `"client_address":"`+tc.want+`"`)
			if strings.Contains(logs.String(), "6.6.6.6") {
				t.Errorf("a client-written address is in the log:\n%s", logs.String())
			}
		})
	}
}

// TestTrustedProxiesFlag: --trusted-proxies takes CIDR prefixes and
// addresses; anything else is an error naming the flag.
func TestTrustedProxiesFlag(t *testing.T) {
	for _, tc := range []struct {
		v  string
		ok bool
	}{{"127.0.0.0/8,::1/128", true}, {"10.0.0.9", true}, {"", true}, {"10.0.0.0/33", false}, {"ingress-nginx", false}} {
		o := testOptions()
		o.TrustedProxies = tc.v
		err := o.Validate()
		if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "--trusted-proxies")) {
			t.Errorf("--trusted-proxies=%q: Validate() = %v, want ok=%v", tc.v, err, tc.ok)
		}
	}
}
