//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// testTokenPlaces: scenario 9. A token a client puts
// anywhere but the one Authorization header (the path, the query, the
// fragment, the Host header, a cookie, the User-Agent, a second
// Authorization header) never opens a session and never reaches a log: each
// token is fresh and tracked, so scenario 8 greps every log of the run (the
// front's access and error logs, extauthz, bridge, the stand-in's access
// log) for it; this scenario checks its own tokens at once as well, after
// the front has logged each request.
func (e *env) testTokenPlaces(t *testing.T, f front) {
	id := e.podAgent(t, peerName(f, "s9"))
	fresh := func() string {
		return e.tokenFor(t, stack.Namespace, agentSA, stack.TokenOptions{
			BoundKind: "Pod", BoundName: id.pod.Name, BoundUID: string(id.pod.UID)})
	}
	host := strings.TrimPrefix(f.base, "https://")
	upgrade := "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	var tokens []string
	logged := e.accessLines(f)
	// A subprotocol case carries a valid Authorization, so the upgrade
	// reaches the bridge, which refuses the subprotocol (and logs it).
	offer := "Host: " + host + "\r\n" + upgrade + "Authorization: Bearer " + fresh() + "\r\n" +
		"Sec-WebSocket-Protocol: %s\r\n"
	cases := []struct {
		name, target, headers string
		encode                func(string) string // how the token is written; nil: as is
	}{
		{"path", "/relay/%s", "Host: " + host + "\r\n" + upgrade, nil},
		{"query", "/relay?access_token=%s", "Host: " + host + "\r\n" + upgrade, nil},
		{"query_beside_valid_header", "/relay?token=%s", "Host: " + host + "\r\n" + upgrade +
			"Authorization: Bearer " + fresh() + "\r\n", nil},
		{"fragment", "/relay#%s", "Host: " + host + "\r\n" + upgrade, nil},
		{"host_header", "/relay", "Host: %s\r\n" + upgrade, nil},
		{"cookie", "/relay", "Host: " + host + "\r\n" + upgrade + "Cookie: token=%s\r\n", nil},
		{"user_agent", "/relay", "Host: " + host + "\r\n" + upgrade + "User-Agent: %s\r\n", nil},
		{"second_authorization", "/relay", "Host: " + host + "\r\n" + upgrade +
			"Authorization: Bearer " + fresh() + "\r\nAuthorization: Bearer %s\r\n", nil},
		// Kubernetes-style WebSocket clients (kubectl exec over WebSocket)
		// offer the bearer token, base64url-encoded, as a subprotocol.
		{"subprotocol_k8s_bearer", "/relay", offer, k8sBearerSubprotocol},
		{"subprotocol_raw", "/relay", offer, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok := fresh()
			tokens = append(tokens, tok)
			written := tok
			if c.encode != nil {
				written = e.track(c.encode(tok))
			}
			target, headers := c.target, c.headers
			if strings.Contains(target, "%s") {
				target = fmt.Sprintf(target, written)
			} else {
				headers = fmt.Sprintf(headers, written)
			}
			status := rawRequest(t, f, "GET "+target+" HTTP/1.1\r\n"+headers+"\r\n")
			if status == http.StatusSwitchingProtocols || status < 400 {
				t.Fatalf("status %d: a misplaced token was accepted", status)
			}
		})
	}
	e.waitLogged(t, f, logged+len(cases))
	files, err := filepath.Glob(filepath.Join(e.procs.LogDir, "*"))
	fatalIf(t, err)
	for _, name := range files {
		b, err := os.ReadFile(name)
		fatalIf(t, err)
		for i, tok := range tokens {
			if bytes.Contains(b, []byte(tok)) {
				t.Errorf("%s holds the token of case %s", filepath.Base(name), cases[i].name)
			}
			if enc := cases[i].encode; enc != nil && bytes.Contains(b, []byte(enc(tok))) {
				t.Errorf("%s holds the encoded token of case %s", filepath.Base(name), cases[i].name)
			}
		}
	}
}

// accessLines counts the access log lines the front has written so far.
func (e *env) accessLines(f front) int {
	file, marker := "nginx-access.log", []byte("\n")
	switch f.name {
	case "envoy":
		file, marker = "envoy.*.log", []byte(`"route":`)
	case "envoy-standin":
		file, marker = "envoy-standin.log", []byte(`"route":`)
	}
	matches, _ := filepath.Glob(filepath.Join(e.procs.LogDir, file))
	lines := 0
	for _, m := range matches {
		b, _ := os.ReadFile(m)
		lines += bytes.Count(b, marker)
	}
	return lines
}

// waitLogged polls until the front's access log holds n lines, so the scan
// after it sees what the front wrote for the scenario's requests (and
// proves they were logged at all).
func (e *env) waitLogged(t *testing.T, f front, n int) {
	t.Helper()
	testutil.EventuallyWithin(t, 10*time.Second, fmt.Sprintf("%d lines in the %s access log", n, f.name),
		func() bool { return e.accessLines(f) >= n })
}

// rawRequest sends one request exactly as written (a fragment in the target,
// repeated headers) over TLS to f and returns the answer's status.
func rawRequest(t *testing.T, f front, req string) int {
	t.Helper()
	d := &net.Dialer{Timeout: ioTimeout}
	conf := f.tls.Clone()
	conf.ServerName = "relay.example.com"
	conn, err := tls.DialWithDialer(d, "tcp", strings.TrimPrefix(f.base, "https://"), conf)
	fatalIf(t, err)
	defer conn.Close()
	fatalIf(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = conn.Write([]byte(req))
	fatalIf(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// k8sBearerSubprotocol is the subprotocol a Kubernetes-style WebSocket
// client offers for a bearer token.
func k8sBearerSubprotocol(tok string) string {
	return "base64url.bearer.authorization.k8s.io." + base64.RawURLEncoding.EncodeToString([]byte(tok))
}
