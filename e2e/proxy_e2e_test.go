//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/tools/probe"
)

// proxyIdleTimeout is the tinyproxy Timeout of testForwardProxy: shorter
// than the bridge's 20 s pings and the agent's 25 s keepalive, so an idle
// tunnel is cut, and long enough for every other subtest's connection.
const proxyIdleTimeout = 10

// testForwardProxy: an agent behind a real forward proxy (Debian's
// tinyproxy: CONNECT only to the nginx front's port, Basic auth, Timeout
// 10 s), one proxy for every subtest. The agent's session and the probe go
// through it; a CONNECT to another port is refused (403), one without
// credentials needs them (407), a certificate not from the expected CA is
// named, and the proxy's idle timeout is named by the probe's --idle.
func (e *env) testForwardProxy(t *testing.T) {
	nginx, other := e.fronts[0], e.fronts[1]
	port, err := stack.PortOf(strings.TrimPrefix(nginx.base, "https://"))
	fatalIf(t, err)
	pass := make([]byte, 12)
	_, _ = rand.Read(pass)
	o := stack.TinyproxyOptions{ConnectPorts: []int{port}, User: "wkproxy", Password: e.track(hex.EncodeToString(pass)), IdleTimeout: proxyIdleTimeout}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tp, err := stack.StartTinyproxy(ctx, e.procs, filepath.Join(e.runDir, "tinyproxy"), "tinyproxy", o)
	fatalIf(t, err)
	t.Cleanup(func() { _ = tp.Proc.Stop(5 * time.Second) })
	withAuth, bare := tp.URL(o, true), tp.URL(o, false)
	ca := e.frontCAFile(t)
	agent := e.podAgent(t, peerName(nginx, "proxied-agent"))
	prober := e.podAgent(t, peerName(nginx, "proxied-probe"))
	args := func(url string, extra ...string) []string {
		return append([]string{"--url", url, "--token-file", prober.tokenFile, "--public-key", prober.key.Base64()}, extra...)
	}

	t.Run("agent_session_through_proxy", func(t *testing.T) {
		opts := nginx.opts(agent)
		opts.Proxy = http.ProxyURL(withAuth)
		c, err := dialAgent(opts, agent.key)
		fatalIf(t, err)
		defer c.Close()
		alive(t, c, agent.key)
		wantProxyLog(t, tp, fmt.Sprintf("CONNECT 127.0.0.1:%d HTTP/1.1", port))
	})
	t.Run("probe_through_proxy", func(t *testing.T) {
		code, res := e.runProbe(t, args(nginx.url, "--ca-file", ca, "--proxy", withAuth.String(), "--register", "--count", "1")...)
		if code != probe.ExitOK || res.Proxy == nil || res.Proxy.Mode != probe.ProxyModeExplicit {
			t.Fatalf("exit %d, proxy %+v; report %+v", code, res.Proxy, res)
		}
		wantStages(t, res, "dns:skipped proxy:ok connect:ok tls:ok upgrade:ok register:ok echo:ok")
		if st := stageOf(res, probe.StageConnect); st.HTTPStatus != http.StatusOK {
			t.Errorf("connect stage %+v, want status 200", st)
		}
		if want := "http://wkproxy@" + tp.Addr; res.Proxy.URL != want {
			t.Errorf("proxy URL in the report %q, want %q (no password)", res.Proxy.URL, want)
		}
	})
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stages string
		status int // of the connect stage
	}{
		{"proxy_auth_required", args(nginx.url, "--ca-file", ca, "--proxy", bare.String()), probe.ExitProxyAuth, "dns:skipped proxy:ok connect:failed", http.StatusProxyAuthRequired},
		{"connect_port_not_allowed", args(other.url, "--ca-file", ca, "--proxy", withAuth.String()), probe.ExitProxyRefused, "dns:skipped proxy:ok connect:failed", http.StatusForbidden},
		{"certificate_not_from_expected_ca", args(nginx.url, "--proxy", withAuth.String()), probe.ExitProxyTLS, "dns:skipped proxy:ok connect:ok tls:failed", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, res := e.runProbe(t, tc.args...)
			if code != tc.code || res.Fix == "" {
				t.Fatalf("exit %d fix %q, want exit %d and a fix; report %+v", code, res.Fix, tc.code, res)
			}
			wantStages(t, res, tc.stages)
			if st := stageOf(res, probe.StageConnect); st.HTTPStatus != tc.status {
				t.Errorf("connect stage %+v, want status %d", st, tc.status)
			}
			t.Logf("fix: %s", res.Fix)
		})
	}
	t.Run("environment_mode", func(t *testing.T) { e.testProxyFromEnvironment(t, tp, withAuth.String(), port, args) })
	t.Run("proxy_idle_timeout_named", func(t *testing.T) {
		idle := 2 * proxyIdleTimeout * time.Second
		code, res := e.runProbe(t, args(nginx.url, "--ca-file", ca, "--proxy", withAuth.String(), "--register", "--count", "1", "--idle", idle.String())...)
		if code != probe.ExitIdleClosed || !strings.Contains(res.Fix, tp.Addr) {
			t.Fatalf("exit %d fix %q, want exit %d naming the proxy %s; report %+v", code, res.Fix, probe.ExitIdleClosed, tp.Addr, res)
		}
		wantStages(t, res, "dns:skipped proxy:ok connect:ok tls:ok upgrade:ok register:ok echo:ok idle:failed")
		st := stageOf(res, probe.StageIdle)
		if st.CloseCode != 0 {
			t.Errorf("idle stage %+v: the proxy sends no WebSocket close frame", st)
		}
		wantProxyLog(t, tp, "Idle Timeout")
		t.Logf("idle stage: %s; fix: %s", st.Error, res.Fix)
	})
}

// wantStages compares the report's stages, "name:status" each, in order.
func wantStages(t *testing.T, res probe.Result, want string) {
	t.Helper()
	var got []string
	for _, s := range res.Stages {
		got = append(got, s.Name+":"+s.Status)
	}
	if strings.Join(got, " ") != want {
		t.Errorf("stages %q, want %q", strings.Join(got, " "), want)
	}
}

func stageOf(res probe.Result, name string) probe.Stage {
	for _, s := range res.Stages {
		if s.Name == name {
			return s
		}
	}
	return probe.Stage{}
}

// wantProxyLog: tinyproxy's own log has the line (it logs each request
// line and each idle close).
func wantProxyLog(t *testing.T, tp *stack.Tinyproxy, line string) {
	t.Helper()
	b, err := os.ReadFile(tp.Proc.LogPath)
	fatalIf(t, err)
	if !strings.Contains(string(b), line) {
		t.Errorf("tinyproxy's log has no %q", line)
	}
}

// testProxyFromEnvironment: the agent's mode environment, set as the agent
// reads it (WIREKUBE_RELAY_PROXY=environment, no --proxy), sends the CONNECT
// to the proxy in HTTPS_PROXY. Go never proxies a loopback address, so the
// URL names a host that is not one: relay.wirekube.invalid (RFC 2606: never
// resolves), which the real tinyproxy cannot reach (500). With NO_PROXY
// matching it, the probe dials directly, as the agent would.
func (e *env) testProxyFromEnvironment(t *testing.T, tp *stack.Tinyproxy, proxyURL string, port int, args func(string, ...string) []string) {
	url := fmt.Sprintf("wss://relay.wirekube.invalid:%d/relay", port)
	t.Setenv("WIREKUBE_RELAY_PROXY", "environment")
	t.Setenv("HTTPS_PROXY", proxyURL)
	t.Setenv("NO_PROXY", "")
	code, res := e.runProbe(t, args(url)...)
	if code != probe.ExitProxyRefused || res.Proxy == nil || res.Proxy.Mode != probe.ProxyModeEnvironment || res.Proxy.Source != "WIREKUBE_RELAY_PROXY" {
		t.Fatalf("exit %d proxy %+v, want exit %d in mode environment from WIREKUBE_RELAY_PROXY; report %+v", code, res.Proxy, probe.ExitProxyRefused, res)
	}
	wantStages(t, res, "dns:skipped proxy:ok connect:failed")
	if st := stageOf(res, probe.StageConnect); st.HTTPStatus != http.StatusInternalServerError {
		t.Errorf("connect stage %+v, want tinyproxy's 500 (it cannot resolve the name)", st)
	}
	wantProxyLog(t, tp, fmt.Sprintf("CONNECT relay.wirekube.invalid:%d HTTP/1.1", port))

	t.Setenv("NO_PROXY", ".invalid")
	code, res = e.runProbe(t, args(url)...)
	if code != probe.ExitNetwork || res.Proxy == nil || res.Proxy.URL != "" {
		t.Fatalf("exit %d proxy %+v, want exit %d and no proxy (NO_PROXY matches); report %+v", code, res.Proxy, probe.ExitNetwork, res)
	}
	wantStages(t, res, "dns:failed")
}
