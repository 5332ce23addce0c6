package envoystandin

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestOversizedHeadersRefusedBeforeExtauthz: headers beyond envoy.yaml's
// max_request_headers_kb (16 KiB) get 431 and extauthz is never asked; a
// request under it goes through.
func TestOversizedHeadersRefusedBeforeExtauthz(t *testing.T) {
	s, authz := newAllowingServer(t, &peerBridge{}, Options{})
	for _, tc := range []struct {
		size       int
		want       int
		wantChecks int64
	}{
		{17 * 1024, http.StatusRequestHeaderFieldsTooLarge, 0},
		{15 * 1024, http.StatusOK, 1},
	} {
		r := httptest.NewRequest(http.MethodGet, "https://relay.example.com/relay", nil)
		r.Header.Set("X-Padding", strings.Repeat("a", tc.size))
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != tc.want || authz.calls.Load() != tc.wantChecks {
			t.Errorf("%d bytes of header: status %d after %d checks, want %d after %d", tc.size, w.Code, authz.calls.Load(), tc.want, tc.wantChecks)
		}
	}
}

// echoBridge takes a WebSocket-style upgrade with 101 and echoes the
// bytes after it; any other request gets 200.
func echoBridge(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") == "" {
		return
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	rw.Flush()
	io.Copy(conn, rw)
}

// TestIdleConnectionClosed: a keep-alive connection left idle past the
// configured idle_timeout is closed by the stand-in, while an upgraded
// connection opened before it (an active stream, idle as long) still
// carries bytes afterwards.
func TestIdleConnectionClosed(t *testing.T) {
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	cert := ts.TLS.Certificates[0]
	ts.Close()
	s, _ := newAllowingServer(t, http.HandlerFunc(echoBridge), Options{IdleTimeout: 100 * time.Millisecond})
	s.opts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }() // owned: received below
	defer func() { cancel(); <-done }()
	dial := func() (*tls.Conn, *bufio.Reader) {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	status := func(br *bufio.Reader, want int) {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("status %d, want %d", resp.StatusCode, want)
		}
	}

	upgraded, ubr := dial()
	io.WriteString(upgraded, "GET /relay HTTP/1.1\r\nHost: relay\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	status(ubr, http.StatusSwitchingProtocols)

	idle, ibr := dial()
	io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n")
	status(ibr, http.StatusOK)
	// A bound for the failure case only: with no idle timeout the read
	// would block for ever.
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := ibr.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle keep-alive connection: read %v, want EOF (closed by the stand-in)", err)
	}

	io.WriteString(upgraded, "ping")
	buf := make([]byte, 4)
	upgraded.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(ubr, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("upgraded connection after the idle one closed: %q, %v; want the echo", buf, err)
	}
	upgraded.Close()
}
