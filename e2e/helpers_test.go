//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testagent"
	"github.com/wirekube/relay-ws/relayproto"
)

const ioTimeout = 5 * time.Second

// session dials as the real agent (Register first) and proves the session
// is live with a Data frame to itself.
func session(t *testing.T, f front, id identity) *testagent.Conn {
	t.Helper()
	c, err := dialAgent(f.opts(id), id.key)
	if err != nil {
		t.Fatalf("%s: dial as %s: %v", f.name, id.peer, err)
	}
	t.Cleanup(func() { c.Close() })
	if c.Subprotocol() != contract.Subprotocol {
		t.Errorf("subprotocol %q, want %q", c.Subprotocol(), contract.Subprotocol)
	}
	alive(t, c, id.key)
	return c
}

// backoffWithin bounds the wait for the bridge's per-identity refusals
// (429 while the previous session of the peer is torn down, 403
// register_key_mismatch for the window after a mismatch on purpose).
const backoffWithin = 15 * time.Second

// dialAgent is testagent.Dial, waiting out the bridge's per-identity
// refusals: scenarios reconnect an identity right after ending a session.
func dialAgent(o testagent.Options, key relayproto.Key) (*testagent.Conn, error) {
	return testagent.RetryBackoff(context.Background(), backoffWithin, func() (*testagent.Conn, error) {
		return testagent.Dial(context.Background(), o, key)
	})
}

// dialRawRetry is testagent.DialRaw, waiting out the same refusals.
func dialRawRetry(o testagent.Options) (*testagent.Conn, error) {
	return testagent.RetryBackoff(context.Background(), backoffWithin, func() (*testagent.Conn, error) {
		return testagent.DialRaw(context.Background(), o)
	})
}

// alive sends a Data frame to the session's own key; the relay echoes it.
func alive(t *testing.T, c *testagent.Conn, self relayproto.Key) {
	t.Helper()
	exchange(t, c, c, self, self)
}

// exchange sends a random payload from a (key ka) to b (key kb) and checks
// that b receives it intact with the source key rewritten to ka.
func exchange(t *testing.T, a, b *testagent.Conn, ka, kb relayproto.Key) {
	t.Helper()
	payload := randomBytes(64)
	if err := a.SendData(kb, payload); err != nil {
		t.Fatalf("send: %v", err)
	}
	src, got, err := b.ReadData(ioTimeout)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if !src.Equal(ka) || !bytes.Equal(got, payload) {
		t.Fatalf("received from %s %d bytes, want from %s the %d bytes sent", src, len(got), ka, len(payload))
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// wantRefused dials and expects the upgrade to be refused with status and
// reason (and WWW-Authenticate: Bearer on 401).
func wantRefused(t *testing.T, o testagent.Options, status int, reason contract.Reason) {
	t.Helper()
	c, err := testagent.DialRaw(context.Background(), o)
	if err == nil {
		c.Close()
		t.Fatalf("upgrade accepted, want HTTP %d %s", status, reason)
	}
	checkDeny(t, err, status, reason)
}

func checkDeny(t *testing.T, err error, status int, reason contract.Reason) {
	t.Helper()
	var de *testagent.DialError
	if !errors.As(err, &de) {
		t.Fatalf("dial error %v, want HTTP %d %s", err, status, reason)
	}
	if de.Status != status || de.Reason != string(reason) {
		t.Fatalf("HTTP %d reason %q (body %q), want HTTP %d %q", de.Status, de.Reason, strings.TrimSpace(de.Body), status, reason)
	}
	if status == http.StatusUnauthorized && !strings.HasPrefix(de.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 without WWW-Authenticate: Bearer (got %q)", de.Header.Get("WWW-Authenticate"))
	}
	// Every answer of ours (one with a reason) is not to be cached; nginx's
	// own 400 page for a malformed request carries no reason.
	if cc := de.Header.Get("Cache-Control"); reason != "" && cc != "no-store" {
		t.Errorf("deny %d %s with Cache-Control %q, want no-store", status, reason, cc)
	}
}

// wantClose expects the server to close the session with code and reason.
func wantClose(t *testing.T, c *testagent.Conn, code int, reason contract.Reason, within time.Duration) {
	t.Helper()
	ce, err := c.WaitClose(within)
	if err != nil {
		t.Fatalf("waiting for close %d %s: %v", code, reason, err)
	}
	if ce.Code != code || ce.Text != string(reason) {
		t.Fatalf("closed with %d %q, want %d %q", ce.Code, ce.Text, code, reason)
	}
}

// rawResult is the answer to a hand-made HTTP request.
type rawResult struct {
	status int
	reason string
	header http.Header
}

// raw sends one HTTP/1.1 request through f with exactly these headers.
func raw(t *testing.T, f front, method, target string, header http.Header, body string) rawResult {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.base+target, rd)
	fatalIf(t, err)
	req.Header = header
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: f.tls, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return rawResult{status: resp.StatusCode, reason: resp.Header.Get(contract.HeaderDenyReason), header: resp.Header}
}

// upgradeHeader is a well-formed WebSocket upgrade request's headers.
func upgradeHeader(token string) http.Header {
	h := http.Header{}
	h.Set("Upgrade", "websocket")
	h.Set("Connection", "Upgrade")
	h.Set("Sec-WebSocket-Version", "13")
	h.Set("Sec-WebSocket-Key", base64.StdEncoding.EncodeToString(randomBytes(16)))
	h.Set("Sec-WebSocket-Protocol", contract.Subprotocol)
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return h
}

func wantRaw(t *testing.T, got rawResult, status int, reason contract.Reason) {
	t.Helper()
	if got.status != status || got.reason != string(reason) {
		t.Fatalf("HTTP %d reason %q, want HTTP %d %q", got.status, got.reason, status, reason)
	}
}

type agentOptions = testagent.Options

func dialRaw(o testagent.Options) (*testagent.Conn, error) {
	return testagent.DialRaw(context.Background(), o)
}

func denyMatches(err error, status int, reason contract.Reason) bool {
	var de *testagent.DialError
	return errors.As(err, &de) && de.Status == status && de.Reason == string(reason)
}

// withToken is the agent options through f with a literal token.
func (f front) withToken(token string) testagent.Options {
	return testagent.Options{URL: f.url, Token: token, TLS: f.tls}
}
