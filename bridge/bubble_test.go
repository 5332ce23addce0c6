package bridge

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

// memListener is an in-memory net.Listener: DialContext hands one end of a
// net.Pipe to Accept and returns the other. Created inside a
// testing/synctest bubble, every blocking read, write and accept on it is
// durably blocking and its deadlines run on the bubble's clock, so the
// bridge's timers (register timeout, pings, drain spacing) can be tested to
// the exact instant without waiting for them.
type memListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

// DialContext connects to the listener; network and address are ignored.
func (l *memListener) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "mem" }

// bubble is a bridge served on a memListener with a pipe relay; start it
// inside synctest.Test.
type bubble struct {
	srv   *Server
	ln    *memListener // the main listener (the relay path)
	admin *memListener // the metrics listener: /healthz, /readyz, /metrics
	relay *pipeRelay
	logs  *testutil.SyncBuffer
	http  *http.Client
	stop  func() // cancels Run and waits for it (also at cleanup)
}

func startBubble(t *testing.T, mod func(*Options)) *bubble {
	t.Helper()
	b := &bubble{ln: newMemListener(), admin: newMemListener(), relay: newPipeRelay(), logs: &testutil.SyncBuffer{}}
	o := testOptions("192.0.2.1:3478") // a literal: no DNS lookup; DialRelay ignores it
	o.DialRelay = b.relay.dial
	if mod != nil {
		mod(&o)
	}
	srv, err := newFromOptions(o, slog.New(slog.NewJSONHandler(b.logs, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv.closeGrace = 500 * time.Millisecond
	b.srv = srv
	tr := &http.Transport{DialContext: b.admin.DialContext}
	b.http = &http.Client{Transport: tr}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, b.ln, b.admin) }()
	var once sync.Once
	b.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			tr.CloseIdleConnections()
		})
	}
	t.Cleanup(b.stop)
	return b
}

// status is the status of GET path on the metrics listener.
func (b *bubble) status(t *testing.T, path string) int {
	t.Helper()
	resp, err := b.http.Get("http://bridge" + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// dial upgrades with the identity headers of k.
func (b *bubble) dial(t *testing.T, k relayproto.Key) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{NetDialContext: b.ln.DialContext, Subprotocols: []string{contract.Subprotocol},
		HandshakeTimeout: 5 * time.Second}
	ws, _, err := d.Dial("ws://bridge/relay", identity(k))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// register dials as k, sends Register and returns the client and the relay
// end of the session once the relay end has read the Register.
func (b *bubble) register(t *testing.T, k relayproto.Key) (*websocket.Conn, net.Conn) {
	t.Helper()
	ws := b.dial(t, k)
	relayEnd := b.relay.next(t)
	send(t, ws, relayproto.AppendRegister(nil, k))
	got := make([]byte, relayproto.HeaderSize+relayproto.KeySize)
	if _, err := io.ReadFull(relayEnd, got); err != nil {
		t.Fatalf("relay end: %v", err)
	}
	return ws, relayEnd
}
