//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testagent"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// The client's real address, from the trusted hop only. Every
// dial here carries a forged X-Forwarded-For; what extauthz's check line,
// the bridge's session line and /debug/sessions record must be the address
// the front established (the loopback peer, or the PROXY protocol's
// source), never an entry the client wrote.

// forgedEntries are the X-Forwarded-For entries every dial here forges.
var forgedEntries = []string{"6.6.6.6", "192.0.2.66"}

// testClientAddress: scenario 13, through each front of the stack.
func (e *env) testClientAddress(t *testing.T, f front) {
	e.checkClientAddress(t, f, e.podAgent(t, peerName(f, "s13-a")), "127.0.0.1", nil)
}

// matrixClientAddress: the same through a row of the front matrix.
func (e *env) matrixClientAddress(t *testing.T, r *frontRow) {
	e.checkClientAddress(t, r.front, e.matrixAgent(t, r, "ca"), "127.0.0.1", nil)
}

// checkClientAddress connects id through f (over dial when set) with a
// forged X-Forwarded-For, and checks that the listing, extauthz's last
// check line of the peer and the bridge's last session start line of it
// name want, and that no log line of theirs holds a forged entry. (The
// last: podAgent's wait for the peer asks extauthz straight from loopback
// first.) It returns the live session.
func (e *env) checkClientAddress(t *testing.T, f front, id identity, want string,
	dial func(ctx context.Context, network, addr string) (net.Conn, error)) *testagent.Conn {
	t.Helper()
	o := f.opts(id)
	o.Header = http.Header{"X-Forwarded-For": {strings.Join(forgedEntries, ", ")}}
	o.NetDialContext = dial
	c, err := dialAgent(o, id.key)
	if err != nil {
		t.Fatalf("%s: dial as %s: %v", f.name, id.peer, err)
	}
	t.Cleanup(func() { c.Close() })
	alive(t, c, id.key)

	l := listPeer(t, e.stack.BridgeMetrics, id.peer)
	if len(l.Sessions) != 1 || l.Sessions[0].ClientAddress != want {
		t.Fatalf("%s listed %+v, want one session with client_address %s", id.peer, l.Sessions, want)
	}
	for _, w := range []struct{ component, msg string }{{"extauthz", "check"}, {"bridge", "session started"}} {
		var lines []map[string]any
		testutil.EventuallyWithin(t, 10*time.Second, w.component+" "+w.msg+" line of "+id.peer, func() bool {
			lines = e.peerLogLines(t, w.component, id.peer, w.msg)
			return len(lines) > 0
		})
		if last := lines[len(lines)-1]; last["client_address"] != want {
			t.Errorf("%s %q line of %s: client_address %v, want %s", w.component, w.msg, id.peer, last["client_address"], want)
		}
	}
	for _, component := range []string{"extauthz", "bridge"} {
		e.noForgedEntry(t, component)
	}
	return c
}

// listPeer is the bridge's listing of peer's sessions.
func listPeer(t *testing.T, metrics, peer string) contract.SessionList {
	t.Helper()
	resp, err := http.Get("http://" + metrics + contract.SessionsPath + "?peer=" + peer)
	fatalIf(t, err)
	defer resp.Body.Close()
	var l contract.SessionList
	fatalIf(t, json.NewDecoder(resp.Body).Decode(&l))
	return l
}

// peerLogLines are the JSON lines of component's logs with msg about peer.
func (e *env) peerLogLines(t *testing.T, component, peer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, b := range e.componentLogs(t, component) {
		for l := range strings.Lines(string(b)) {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["peer"] == peer && m["msg"] == msg {
				out = append(out, m)
			}
		}
	}
	return out
}

func (e *env) componentLogs(t *testing.T, component string) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(e.procs.LogDir, component+".*.log"))
	fatalIf(t, err)
	var out [][]byte
	for _, name := range files {
		b, err := os.ReadFile(name)
		fatalIf(t, err)
		out = append(out, b)
	}
	return out
}

// noForgedEntry fails when a forged X-Forwarded-For entry is anywhere in
// component's logs.
func (e *env) noForgedEntry(t *testing.T, component string) {
	t.Helper()
	for _, b := range e.componentLogs(t, component) {
		for _, forged := range forgedEntries {
			if strings.Contains(string(b), forged) {
				t.Errorf("%s's log holds the forged X-Forwarded-For entry %s", component, forged)
			}
		}
	}
}

// testProxyProtocol: the shipped nginx file with its PROXY protocol lines
// on (listen ... proxy_protocol, set_real_ip_from the test client,
// real_ip_header proxy_protocol), as behind an NLB: the client writes a
// PROXY v1 header naming 203.0.113.7, then a forged X-Forwarded-For; the
// recorded address is the PROXY header's source.
func (e *env) testProxyProtocol(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(e.runDir, "nginx-proxy-protocol")
	fatalIf(t, os.MkdirAll(dir, 0o755))
	kp, err := e.stack.FrontCA.ServerCert("wirekube-relay-pp", "relay.example.com")
	fatalIf(t, err)
	cert, key, err := kp.WriteFiles(dir, "front")
	fatalIf(t, err)
	addr, err := stack.FreeAddr()
	fatalIf(t, err)
	p, err := stack.StartNginx(ctx, e.procs, e.repo, dir, stack.NginxOptions{Listen: addr, CertFile: cert, KeyFile: key,
		ExtauthzHTTP: e.stack.ExtauthzHTTP, Bridge: e.stack.BridgeAddr, LogDir: filepath.Join(dir, "logs"),
		ProxyProtocolFrom: "127.0.0.1/32"})
	fatalIf(t, err)
	t.Cleanup(func() { _ = p.Stop(5 * time.Second) })
	f := front{name: "nginx-proxy-protocol", url: "wss://" + addr + "/relay", base: "https://" + addr,
		tls: &tls.Config{RootCAs: e.stack.FrontCA.Pool(), MinVersion: tls.VersionTLS12}}
	const source = "203.0.113.7"
	c := e.checkClientAddress(t, f, e.podAgent(t, "pp-s13-a"), source, proxyV1Dialer(source))
	c.Close() // nginx writes the access log line when the session ends

	var access []byte
	testutil.EventuallyWithin(t, 10*time.Second, "nginx's access log line of the session", func() bool {
		access, _ = os.ReadFile(filepath.Join(dir, "logs", "nginx-access.log"))
		return len(access) > 0
	})
	if !strings.HasPrefix(string(access), source+" ") || !strings.Contains(string(access), "client="+source+" ") {
		t.Errorf("nginx's access log line does not start with the PROXY source and name it as client:\n%s", access)
	}
}

// proxyV1Dialer dials TCP and writes a PROXY protocol v1 header naming
// source as the client before anything else, as an L4 load balancer does.
func proxyV1Dialer(source string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		_, port, _ := net.SplitHostPort(addr)
		if _, err := fmt.Fprintf(c, "PROXY TCP4 %s 127.0.0.1 40000 %s\r\n", source, port); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
}
