package probe

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// TestConnectAnswerMeanings: each status a proxy may answer CONNECT with
// leads to the exit code and the fix of what it means.
func TestConnectAnswerMeanings(t *testing.T) {
	withUser := &url.URL{Scheme: "http", Host: "proxy:3128", User: url.UserPassword("u", "p")}
	bare := &url.URL{Scheme: "http", Host: "proxy:3128"}
	for _, tc := range []struct {
		name   string
		status int
		proxy  *url.URL
		code   int
		fix    string
	}{
		{"407 without credentials", 407, bare, ExitProxyAuth, "the proxy requires authentication (407"},
		{"407 with credentials", 407, withUser, ExitProxyAuth, "the proxy refused the credentials in the proxy URL (407"},
		{"401 with credentials", 401, withUser, ExitProxyAuth, "the proxy refused the credentials in the proxy URL (401"},
		{"401 without credentials", 401, bare, ExitProxyAuth, "the proxy requires authentication (401"},
		{"403", 403, withUser, ExitProxyRefused, "allow CONNECT to port 443"},
		{"400", 400, withUser, ExitProxyRefused, "the proxy does not accept CONNECT (400)"},
		{"405", 405, withUser, ExitProxyRefused, "the proxy does not accept CONNECT (405)"},
		{"501", 501, withUser, ExitProxyRefused, "the proxy does not accept CONNECT (501)"},
		{"429", 429, withUser, ExitProxyRefused, "the proxy is limiting this client (429)"},
		{"500", 500, withUser, ExitProxyRefused, "could not reach relay.example.com:443 from its side (500)"},
		{"502", 502, withUser, ExitProxyRefused, "could not reach relay.example.com:443 from its side (502)"},
		{"503", 503, withUser, ExitProxyRefused, "could not reach relay.example.com:443 from its side (503)"},
		{"504", 504, withUser, ExitProxyRefused, "could not reach relay.example.com:443 from its side (504)"},
		{"404", 404, withUser, ExitProxyRefused, "the proxy refused CONNECT to relay.example.com:443 (404)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, fix := connectRefused(&http.Response{StatusCode: tc.status, Header: http.Header{}}, "relay.example.com:443", tc.proxy)
			if code != tc.code || !strings.Contains(fix, tc.fix) {
				t.Errorf("exit %d, fix %q; want exit %d and a fix with %q", code, fix, tc.code, tc.fix)
			}
		})
	}
}

// TestProbeThroughRealTinyproxyAnswers: a real tinyproxy (Debian's) with
// Basic authentication and one allowed port, asked by the probe with no
// credentials, wrong ones, for a port it does not allow, and for an
// allowed port nothing listens on: each answer leads to its own exit code
// and a fix that names the cause (the wrong credentials are not blamed on
// the gateway's side).
func TestProbeThroughRealTinyproxyAnswers(t *testing.T) {
	dir := t.TempDir()
	procs, err := stack.NewProcs(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	closed := closedPort(t)
	o := stack.TinyproxyOptions{User: "wkproxy", Password: "right", ConnectPorts: []int{closed}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tp, err := stack.StartTinyproxy(ctx, procs, dir, "tinyproxy", o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tp.Proc.Stop(5 * time.Second) }()
	wrong := tp.URL(o, false)
	wrong.User = url.UserPassword("wkproxy", "wrong")
	env := newTestEnv(t, false)
	allowed := fmt.Sprintf("ws://127.0.0.1:%d/relay", closed)
	for _, tc := range []struct {
		name, url, proxy string
		code, status     int
		fix              string
	}{
		{"no_credentials", allowed, tp.URL(o, false).String(), ExitProxyAuth, 407, "the proxy requires authentication"},
		{"wrong_credentials", allowed, wrong.String(), ExitProxyAuth, 401, "the proxy refused the credentials"},
		{"port_not_allowed", env.url(), tp.URL(o, true).String(), ExitProxyRefused, 403, "allow CONNECT to port"},
		{"target_down", allowed, tp.URL(o, true).String(), ExitProxyRefused, 500, "could not reach 127.0.0.1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{URL: tc.url, TokenFile: env.tokenFile, PublicKey: env.keyB64, Timeout: 10 * time.Second, Proxy: tc.proxy}
			var out strings.Builder
			err := runOptions(context.Background(), opts, &out)
			if ExitCode(err) != tc.code {
				t.Fatalf("exit %d (%v), want %d:\n%s", ExitCode(err), err, tc.code, out.String())
			}
			testutil.Contains(t, out.String(), fmt.Sprintf("answered %d", tc.status), "fix: ", tc.fix)
		})
	}
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return port
}
