package probe

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// TestChooseProxy: --proxy and the environment decide the proxy the way
// the WireKube agent and Go's http.ProxyFromEnvironment do (the expected
// values are read from WireKube v0.0.17's parseRelayProxyMode and Go's
// documented ProxyFromEnvironment rules, not from this code).
func TestChooseProxy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		url     string
		flag    string
		env     map[string]string
		mode    string
		proxy   string // redacted URL; empty: direct
		errText string // a usage error containing this
		detail  string // the report's explanation contains this
	}{
		{name: "default_direct", url: "wss://relay.example.com/relay", mode: "none"},
		{name: "agent_env_var_environment", url: "wss://relay.example.com/relay", env: map[string]string{"WIREKUBE_RELAY_PROXY": "environment", "HTTPS_PROXY": "http://proxy.corp:3128"}, mode: "environment", proxy: "http://proxy.corp:3128"},
		{name: "agent_word_on", url: "wss://relay.example.com/relay", flag: " ON ", env: map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128"}, mode: "environment", proxy: "http://proxy.corp:3128"},
		{name: "flag_none_beats_env_var", url: "wss://relay.example.com/relay", flag: "direct", env: map[string]string{"WIREKUBE_RELAY_PROXY": "environment", "HTTPS_PROXY": "http://proxy.corp:3128"}, mode: "none",
			detail: "HTTPS_PROXY is set but not used"},
		{name: "wss_ignores_http_proxy", url: "wss://relay.example.com/relay", flag: "environment", env: map[string]string{"HTTP_PROXY": "http://proxy.corp:3128"}, mode: "environment"},
		{name: "ws_uses_http_proxy", url: "ws://relay.example.com/relay", flag: "environment", env: map[string]string{"HTTP_PROXY": "http://plain.corp:8080", "HTTPS_PROXY": "http://proxy.corp:3128"}, mode: "environment", proxy: "http://plain.corp:8080"},
		{name: "upper_case_first", url: "wss://relay.example.com/relay", flag: "environment", env: map[string]string{"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:2"}, mode: "environment", proxy: "http://upper:1"},
		{name: "lower_case_alone", url: "wss://relay.example.com/relay", flag: "environment", env: map[string]string{"https_proxy": "http://lower:2"}, mode: "environment", proxy: "http://lower:2"},
		{name: "scheme_less_value_is_http", url: "wss://relay.example.com/relay", flag: "environment", env: map[string]string{"HTTPS_PROXY": "proxy.corp:3128"}, mode: "environment", proxy: "http://proxy.corp:3128"},
		{name: "no_proxy_domain", url: "wss://relay.example.com/relay", flag: "environment", env: map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128", "NO_PROXY": ".example.com"}, mode: "environment"},
		{name: "no_proxy_other_domain", url: "wss://relay.example.com/relay", flag: "environment", env: map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128", "NO_PROXY": "example.org,10.0.0.0/8"}, mode: "environment", proxy: "http://proxy.corp:3128"},
		{name: "no_proxy_cidr", url: "wss://10.1.2.3:8443/relay", flag: "environment", env: map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128", "NO_PROXY": "10.0.0.0/8"}, mode: "environment"},
		{name: "loopback_never_proxied", url: "wss://127.0.0.1:8443/relay", flag: "environment", env: map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128"}, mode: "environment",
			detail: "Go never proxies loopback"},
		{name: "localhost_never_proxied", url: "wss://localhost:8443/relay", flag: "environment", env: map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128"}, mode: "environment"},
		{name: "explicit_url_password_redacted", url: "wss://127.0.0.1:8443/relay", flag: "http://alice:s3cret@127.0.0.1:3128", mode: "explicit", proxy: "http://alice@127.0.0.1:3128"},
		{name: "explicit_https_proxy_refused", url: "wss://relay.example.com/relay", flag: "https://proxy.corp:3129", errText: "--proxy: an https:// proxy is not supported"},
		{name: "explicit_socks_refused", url: "wss://relay.example.com/relay", flag: "socks5://proxy.corp:1080", errText: `--proxy: proxy scheme "socks5"`},
		{name: "env_https_proxy_refused", url: "wss://relay.example.com/relay", flag: "environment", env: map[string]string{"HTTPS_PROXY": "https://proxy.corp:3129"}, errText: "HTTPS_PROXY: an https:// proxy is not supported"},
		{name: "unknown_word", url: "wss://relay.example.com/relay", flag: "sometimes", errText: `--proxy: unknown value "sometimes"`},
		{name: "unknown_env_var_word", url: "wss://relay.example.com/relay", env: map[string]string{"WIREKUBE_RELAY_PROXY": "maybe"}, errText: `WIREKUBE_RELAY_PROXY: unknown value "maybe"`},
		{name: "env_var_url_not_a_mode", url: "wss://relay.example.com/relay", env: map[string]string{"WIREKUBE_RELAY_PROXY": "http://proxy.corp:3128"}, errText: "WIREKUBE_RELAY_PROXY: unknown value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			o := Options{Proxy: tc.flag, getenv: func(k string) string { return tc.env[k] }}
			p, info, err := o.chooseProxy(u)
			if tc.errText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errText) || ExitCode(err) != ExitUsage {
					t.Fatalf("err %v (exit %d), want a usage error containing %q", err, ExitCode(err), tc.errText)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode != tc.mode || info.URL != tc.proxy || (p == nil) != (tc.proxy == "") {
				t.Fatalf("mode %q url %q (dial via %v), want mode %q url %q", info.Mode, info.URL, p, tc.mode, tc.proxy)
			}
			if !strings.Contains(info.Detail, tc.detail) {
				t.Errorf("detail %q, want it to contain %q", info.Detail, tc.detail)
			}
		})
	}
}

// TestProxyAuthorizationOnlyWithPassword: Basic credentials go to the
// proxy only when the URL has a user and a password, as gorilla/websocket
// v1.5.0 (the agent's library) sends them.
func TestProxyAuthorizationOnlyWithPassword(t *testing.T) {
	for raw, want := range map[string]string{
		"http://proxy:3128":              "",
		"http://alice@proxy:3128":        "",
		"http://alice:s3cret@proxy:3128": "Basic YWxpY2U6czNjcmV0", // base64("alice:s3cret")
	} {
		u, _ := url.Parse(raw)
		if got := proxyAuthorization(u).Get("Proxy-Authorization"); got != want {
			t.Errorf("%s: Proxy-Authorization %q, want %q", redactProxyURL(u), got, want)
		}
	}
}

// TestProbeProxyUnreachable: a proxy whose port refuses, or whose name does
// not resolve, is exit 12 (proxy_unreachable) with the proxy named in the
// report, not exit 3: the gateway was never tried.
func TestProbeProxyUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	env := newTestEnv(t, false)
	for _, tc := range []struct{ name, proxy, stage string }{
		{"port_refused", "http://" + closed, "FAIL proxy"},
		{"name_unknown", "http://proxy.invalid:3128", "FAIL dns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{URL: env.url(), TokenFile: env.tokenFile, PublicKey: env.keyB64, Timeout: 2 * time.Second, Proxy: tc.proxy,
				lookupHost: func(context.Context, string) ([]string, error) {
					return nil, &net.DNSError{Err: "no such host", Name: "proxy.invalid", IsNotFound: true}
				}}
			var out strings.Builder
			err := runOptions(context.Background(), o, &out)
			if ExitCode(err) != ExitProxyUnreachable {
				t.Fatalf("exit %d (%v):\n%s", ExitCode(err), err, out.String())
			}
			testutil.Contains(t, out.String(), "proxy: via "+tc.proxy+" (explicit, from --proxy)", tc.stage, "result: proxy_unreachable (exit 12)", "fix: ")
		})
	}
}
