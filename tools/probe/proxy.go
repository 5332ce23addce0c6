package probe

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpproxy"
)

// The agent's relay proxy setting, read from WireKube v0.0.17 and main
// (pkg/agent/agent.go relayProxyMode, parseRelayProxyMode; pkg/agent/relay
// dial.go dialRelayWebSocket): the Node annotation wirekube.io/relay-proxy
// wins, else the environment variable WIREKUBE_RELAY_PROXY, else no proxy.
// In mode environment a wss:// relay is dialed by gorilla/websocket v1.5.0
// with Dialer.Proxy = http.ProxyFromEnvironment: HTTPS_PROXY for wss://,
// HTTP_PROXY for ws://, NO_PROXY honoured, loopback and localhost never
// proxied, and the tunnel is one HTTP CONNECT. The relay package also has
// an explicit-URL mode (Pool.SetProxyURL), which no agent setting reaches.
const (
	// EnvRelayProxy is the agent's environment variable.
	EnvRelayProxy = "WIREKUBE_RELAY_PROXY"
	// NodeAnnotationRelayProxy is the agent's per-node setting.
	NodeAnnotationRelayProxy = "wirekube.io/relay-proxy"
)

// Proxy modes (Result.Proxy.Mode).
const (
	ProxyModeNone        = "none"
	ProxyModeEnvironment = "environment"
	ProxyModeExplicit    = "explicit"
)

// ProxyInfo says which proxy the probe used and why; the URL never carries
// a password.
type ProxyInfo struct {
	Mode   string `json:"mode"`
	Source string `json:"source"`        // the flag or variable that decided it
	URL    string `json:"url,omitempty"` // redacted; empty: dialed directly
	Detail string `json:"detail,omitempty"`
}

// proxyChoice is the parsed --proxy: the mode and, for explicit, the URL.
type proxyChoice struct {
	mode   string
	url    *url.URL
	source string
}

// parseProxyWord reads a value the way the agent's parseRelayProxyMode
// does (trimmed, lower-cased, the same words), plus an http:// URL for the
// explicit mode.
func parseProxyWord(raw string) (proxyChoice, bool) {
	v := strings.ToLower(strings.TrimSpace(raw))
	switch v {
	case "env", "environment", "enabled", "enable", "true", "on", "proxy":
		return proxyChoice{mode: ProxyModeEnvironment}, true
	case "disabled", "disable", "false", "off", "direct", "none":
		return proxyChoice{mode: ProxyModeNone}, true
	}
	return proxyChoice{}, false
}

// resolveProxyFlag turns --proxy (and, when it is empty, the agent's
// WIREKUBE_RELAY_PROXY) into a choice. Errors name the flag or variable
// and never echo a password.
func resolveProxyFlag(flagValue string, getenv func(string) string) (proxyChoice, error) {
	raw, source := flagValue, "--proxy"
	if strings.TrimSpace(raw) == "" {
		raw, source = getenv(EnvRelayProxy), EnvRelayProxy
		if strings.TrimSpace(raw) == "" {
			return proxyChoice{mode: ProxyModeNone, source: "default (no --proxy, no " + EnvRelayProxy + ")"}, nil
		}
	}
	if c, ok := parseProxyWord(raw); ok {
		c.source = source
		return c, nil
	}
	if source == "--proxy" && strings.Contains(raw, "://") {
		u, err := parseProxyURL(raw, "--proxy")
		if err != nil {
			return proxyChoice{}, err
		}
		return proxyChoice{mode: ProxyModeExplicit, url: u, source: source}, nil
	}
	return proxyChoice{}, fmt.Errorf("%s: unknown value %q: want environment, none (or another word the agent accepts) or http://[USER:PASS@]HOST:PORT; "+
		"the agent ignores an unknown value and falls back to %s or no proxy", source, sanitize(raw, 40), EnvRelayProxy)
}

// parseProxyURL checks a proxy URL the way gorilla/websocket v1.5.0 (the
// agent's WebSocket library) can use it: http:// only. name is the flag or
// variable it came from; the error never holds the URL (it may hold a
// password).
func parseProxyURL(raw, name string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: cannot parse the proxy URL: %v", name, redactURLError(err))
	}
	switch {
	case u.Scheme == "https":
		return nil, fmt.Errorf("%s: an https:// proxy is not supported by the agent's WebSocket library (gorilla/websocket v1.5.0 in WireKube v0.0.17 and main fails with \"proxy: unknown scheme: https\"): use the proxy's http:// port", name)
	case u.Scheme != "http":
		return nil, fmt.Errorf("%s: proxy scheme %q: the probe tests HTTP CONNECT proxies (http://HOST:PORT)", name, u.Scheme)
	case u.Hostname() == "":
		return nil, fmt.Errorf("%s: the proxy URL has no host", name)
	}
	return u, nil
}

// envProxy picks the proxy for target from the environment the way
// http.ProxyFromEnvironment does for gorilla/websocket: the request URL of
// a wss:// dial has scheme https, of ws:// http. Go's standard library
// reads the upper-case variable first (net/http's vendored httpproxy), so
// this does too; x/net's FromEnvironment reads the lower-case one first.
func envProxy(target *url.URL, getenv func(string) string) (*url.URL, string, error) {
	anyOf := func(names ...string) (string, string) {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v, n
			}
		}
		return "", ""
	}
	httpsP, httpsName := anyOf("HTTPS_PROXY", "https_proxy")
	httpP, httpName := anyOf("HTTP_PROXY", "http_proxy")
	noP, _ := anyOf("NO_PROXY", "no_proxy")
	cfg := &httpproxy.Config{HTTPSProxy: httpsP, HTTPProxy: httpP, NoProxy: noP, CGI: getenv("REQUEST_METHOD") != ""}
	scheme, name := "https", httpsName
	if target.Scheme == "ws" {
		scheme, name = "http", httpName
	}
	u, err := cfg.ProxyFunc()(&url.URL{Scheme: scheme, Host: hostPortOf(target)})
	if err != nil {
		return nil, name, fmt.Errorf("%s: %v", name, redactURLError(err))
	}
	if u == nil {
		return nil, name, nil
	}
	if _, err := parseProxyURL(u.String(), name); err != nil {
		return nil, name, err
	}
	return u, name, nil
}

// hostPortOf is the relay's host:port with the scheme's default port, as
// gorilla/websocket puts it in the CONNECT line.
func hostPortOf(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "ws" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// redactProxyURL drops the password (and the query) of a proxy URL.
func redactProxyURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	r := *u
	if r.User != nil {
		r.User = url.User(r.User.Username())
	}
	r.RawQuery, r.Fragment = "", ""
	return r.String()
}

// proxyAuthorization is the header gorilla/websocket v1.5.0 sends: Basic,
// only when the URL has a user and a password.
func proxyAuthorization(u *url.URL) http.Header {
	h := http.Header{}
	if u.User == nil {
		return h
	}
	if pass, ok := u.User.Password(); ok {
		req := &http.Request{Header: http.Header{}}
		req.SetBasicAuth(u.User.Username(), pass)
		h.Set("Proxy-Authorization", req.Header.Get("Authorization"))
	}
	return h
}
