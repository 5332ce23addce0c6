package bridge

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/refrelay"
	"github.com/wirekube/relay-ws/internal/test/refrelay/refrelaytest"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newTestLogger(w *testutil.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// harness is a bridge served on a loopback port for one test.
type harness struct {
	srv   *Server
	reg   *prometheus.Registry
	logs  *testutil.SyncBuffer
	url   string // ws://127.0.0.1:port/relay
	base  string // http://127.0.0.1:port
	admin string // http://127.0.0.1:port of the metrics listener
	relay *refrelay.Server
	stop  func() // cancels Run and waits for it (also at cleanup)
	// clientRead counts the bytes the bridge read from client connections
	// (startBridgeCountingReads only; nil otherwise).
	clientRead *atomic.Int64
}

// countingListener counts the bytes read from every accepted connection.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.n}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

// CloseWrite keeps the half-close after a close frame (session.go).
func (c countingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func testKey(b byte) relayproto.Key {
	var k relayproto.Key
	for i := range k {
		k[i] = b + byte(i)
	}
	return k
}

// testOptions are short durations so rules fire within milliseconds,
// except the register deadline and the ping interval: a test on real
// sockets must not have its outcome decided by a loaded machine reaching
// them first, so a test about them sets its own (in a synctest bubble, or
// where nothing else can end the session).
func testOptions(relayAddr string) Options {
	o := DefaultOptions()
	o.RelayAddr = relayAddr
	o.RegisterTimeout = time.Minute
	o.PingInterval = time.Minute
	o.WriteTimeout = 2 * time.Second
	o.DrainTimeout = 2 * time.Second
	o.RevocationAddr = "" // revocation_test.go runs the stream against its own fake
	// signature_test.go checks signatures; the other tests send identity
	// headers of their own making.
	o.IdentityKeysFile = ""
	// Off unless a test is about them (recovery_test.go, outage_test.go):
	// the other tests open many sessions of one peer and expect
	// relay_unavailable at once.
	o.RelayWait = 0
	o.MaxSessionsPerPeer, o.MaxUnregisteredPerPeer = 1000, 1000
	return o
}

// startBridge starts the reference relay (unless mod sets DialRelay or
// RelayAddr itself) and a bridge in front of it.
func startBridge(t *testing.T, mod func(*Options)) *harness {
	t.Helper()
	return startBridgeListener(t, mod, false)
}

// startBridgeCountingReads is startBridge with h.clientRead counting the
// bytes the bridge reads from clients. The wrapped connections hide the
// socket (no raw-fd reads, no writev fast path): use it only to count.
func startBridgeCountingReads(t *testing.T, mod func(*Options)) *harness {
	t.Helper()
	return startBridgeListener(t, mod, true)
}

func startBridgeListener(t *testing.T, mod func(*Options), countReads bool) *harness {
	t.Helper()
	h := &harness{reg: prometheus.NewRegistry(), logs: &testutil.SyncBuffer{}}
	relay, addr := refrelaytest.Start(t, refrelay.Options{DisableUDP: true,
		Logger: slog.New(slog.DiscardHandler)})
	h.relay = relay
	o := testOptions(addr)
	if mod != nil {
		mod(&o)
	}
	srv, err := newFromOptions(o, newTestLogger(h.logs), h.reg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv.closeGrace = 500 * time.Millisecond
	h.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if countReads {
		h.clientRead = new(atomic.Int64)
		ln = countingListener{ln, h.clientRead}
	}
	h.base = "http://" + ln.Addr().String()
	h.url = "ws://" + ln.Addr().String() + o.Path
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.admin = "http://" + adminLn.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln, adminLn) }()
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(h.stop)
	return h
}

// identity returns the proxy's identity headers for k.
func identity(k relayproto.Key) http.Header {
	h := http.Header{}
	h.Set(contract.HeaderPeer, "node-a")
	h.Set(contract.HeaderPublicKey, k.Base64())
	h.Set(contract.HeaderIdentity, "system:serviceaccount:wirekube-system:wirekube-agent")
	h.Set(contract.HeaderTokenExpires, "2030-01-02T03:04:05Z")
	return h
}

// dial upgrades with hdr (plus the subprotocol) and fails the test on error.
func (h *harness) dial(t *testing.T, hdr http.Header) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{contract.Subprotocol}, HandshakeTimeout: 5 * time.Second}
	ws, resp, err := d.Dial(h.url, hdr)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial: %v (status %d)", err, status)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// register dials as k, registers and waits until the relay has the
// Register.
func (h *harness) register(t *testing.T, k relayproto.Key) *websocket.Conn {
	t.Helper()
	return h.registeredAs(t, identity(k), k)
}

// registeredAs is register with the identity headers hdr.
func (h *harness) registeredAs(t *testing.T, hdr http.Header, k relayproto.Key) *websocket.Conn {
	t.Helper()
	ws := h.dial(t, hdr)
	send(t, ws, relayproto.AppendRegister(nil, k))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.relay.WaitRegistered(ctx, k); err != nil {
		t.Fatalf("relay never saw Register: %v", err)
	}
	return ws
}

func send(t *testing.T, ws *websocket.Conn, b []byte) {
	t.Helper()
	if err := ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// frameStream reads relay frames from a client's binary messages and checks
// that every message holds whole frames only.
type frameStream struct {
	t       *testing.T
	ws      *websocket.Conn
	pending []relayproto.Frame
}

func (fs *frameStream) next() relayproto.Frame {
	fs.t.Helper()
	for len(fs.pending) == 0 {
		_ = fs.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		mt, msg, err := fs.ws.ReadMessage()
		if err != nil {
			fs.t.Fatalf("read: %v", err)
		}
		if mt != websocket.BinaryMessage {
			fs.t.Fatalf("message type %d", mt)
		}
		fs.pending = splitWhole(fs.t, msg)
	}
	f := fs.pending[0]
	fs.pending = fs.pending[1:]
	return f
}

// splitWhole parses msg as whole frames and fails on any leftover.
func splitWhole(t *testing.T, msg []byte) []relayproto.Frame {
	t.Helper()
	var out []relayproto.Frame
	r := bytes.NewReader(msg)
	for r.Len() > 0 {
		f, err := relayproto.ReadFrame(r, nil)
		if err != nil {
			t.Fatalf("message of %d bytes is not whole frames: %v", len(msg), err)
		}
		out = append(out, f)
	}
	return out
}

// expectClose reads until the close frame and checks its code and reason.
func expectClose(t *testing.T, ws *websocket.Conn, code int, reason contract.Reason) {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("want close %d %s, got %v", code, reason, err)
		}
		if ce.Code != code || ce.Text != string(reason) {
			t.Fatalf("close = %d %q, want %d %q", ce.Code, ce.Text, code, reason)
		}
		return
	}
}

func dataFrame(dst relayproto.Key, seq uint32, size int) []byte {
	payload := make([]byte, size)
	binary.BigEndian.PutUint32(payload, seq)
	for i := 4; i < size; i++ {
		payload[i] = byte(seq) + byte(i)
	}
	return relayproto.AppendData(nil, dst, payload)
}

func rawHeader(n uint32, t relayproto.FrameType) []byte {
	return append(binary.BigEndian.AppendUint32(nil, n), byte(t))
}

// pipeRelay stands in for the relay: DialRelay returns one end of a pipe
// and the test holds the other, to see exactly what the bridge forwards.
type pipeRelay struct {
	conns chan net.Conn
}

func newPipeRelay() *pipeRelay { return &pipeRelay{conns: make(chan net.Conn, 16)} }

func (p *pipeRelay) dial(context.Context, string, string) (net.Conn, error) {
	bridgeEnd, relayEnd := net.Pipe()
	p.conns <- relayEnd
	return bridgeEnd, nil
}

func (p *pipeRelay) next(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-p.conns:
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("bridge never dialed the relay")
		return nil
	}
}

// readAll collects what the bridge sends to the relay end until EOF.
func readAll(t *testing.T, c net.Conn) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("relay end: %v", err)
	}
	return b
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// newFromOptions completes o and builds a Server, as the binary does.
func newFromOptions(o Options, logger *slog.Logger, reg *prometheus.Registry) (*Server, error) {
	cfg, err := o.Complete()
	if err != nil {
		return nil, err
	}
	return New(cfg, logger, reg)
}

// wsFrame and testMask: the client frames of testutil.ClientFrame.
var wsFrame, testMask = testutil.ClientFrame, testutil.WSMask
