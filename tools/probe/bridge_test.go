package probe

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/bridge"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/refrelay"
	"github.com/wirekube/relay-ws/internal/test/refrelay/refrelaytest"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

// authFront stands in for the proxy and ext_authz in front of the real
// bridge: it strips client X-WireKube-* headers, accepts one token, and
// sets the identity headers binding it to key.
type authFront struct {
	next http.Handler
	key  relayproto.Key
}

func (a *authFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for name := range r.Header {
		if contract.IsWireKubeHeader(name) {
			r.Header.Del(name)
		}
	}
	if r.Header.Get("Authorization") != "Bearer "+testToken {
		w.Header().Set(contract.HeaderDenyReason, string(contract.ReasonTokenInvalid))
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "denied", http.StatusUnauthorized)
		return
	}
	r.Header.Set(contract.HeaderPeer, "node-a")
	r.Header.Set(contract.HeaderPublicKey, a.key.Base64())
	r.Header.Set(contract.HeaderIdentity, "system:serviceaccount:wirekube-system:wirekube-relay-peer-node-a")
	r.Header.Set(contract.HeaderTokenExpires, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	a.next.ServeHTTP(w, r)
}

// startRealBridge runs the real bridge (behind authFront) in front of
// relayAddr and returns the ws:// relay URL.
func startRealBridge(t *testing.T, relayAddr string, key relayproto.Key) string {
	t.Helper()
	o := bridge.DefaultOptions()
	o.RelayAddr, o.MetricsListen, o.DrainTimeout, o.RegisterTimeout = relayAddr, "", 2*time.Second, 2*time.Second
	o.RevocationAddr = ""   // no extauthz here: authFront sets no binding
	o.IdentityKeysFile = "" // nor a signature
	o.RelayWait = 200 * time.Millisecond
	cfg, err := o.Complete()
	if err != nil {
		t.Fatal(err)
	}
	b, err := bridge.New(cfg, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&authFront{next: b.Handler(), key: key})
	t.Cleanup(func() {
		b.Drain() // ends the sessions' goroutines before the leak check
		srv.Close()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http") + contract.DefaultRelayPath
}

func TestProbeRealBridge(t *testing.T) {
	key := relayproto.Key{7, 7, 7}
	_, relayAddr := refrelaytest.Start(t, refrelay.Options{DisableUDP: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadRelay := ln.Addr().String()
	_ = ln.Close()
	tokenFile := writeFile(t, "token", testToken+"\n")
	other := relayproto.Key{8, 8, 8}
	for _, tc := range []struct {
		name      string
		relayAddr string
		register  relayproto.Key
		mode      []string
		code      int
		want      []string
	}{
		{"check mode", relayAddr, key, nil, ExitOK, []string{"(mode check)", "ok   upgrade", "subprotocol \"wirekube.relay.probe.v1\"",
			"ok   register", "sent it nothing", "skip echo", "result: ok"}},
		{"check mode key mismatch", relayAddr, other, nil, ExitClosed, []string{"FAIL register", "1008 register_key_mismatch", "fix: " + fixes[contract.CloseRegisterKeyMismatch]}},
		{"check mode relay down", deadRelay, key, nil, ExitUnavailable, []string{"503 Service Unavailable, reason relay_unavailable"}},
		{"echo through bridge and relay", relayAddr, key, []string{"--register", "--count", "5"}, ExitOK, []string{"(mode register)",
			"warning: --register: the relay replaces", "ok   upgrade", "5/5 round trips", "result: ok"}},
		{"key mismatch closes 1008", relayAddr, other, []string{"--register"}, ExitClosed, []string{"FAIL register", "1008 register_key_mismatch", "fix: " + fixes[contract.CloseRegisterKeyMismatch]}},
		{"relay down answers 503", deadRelay, key, []string{"--register"}, ExitUnavailable, []string{"503 Service Unavailable, reason relay_unavailable", "result: unavailable (exit 7)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := startRealBridge(t, tc.relayAddr, key)
			args := append([]string{"--url", url, "--token-file", tokenFile, "--public-key", tc.register.Base64()}, tc.mode...)
			code, out, _ := runProbe(t, args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			testutil.Contains(t, out, tc.want...)
		})
	}
}
