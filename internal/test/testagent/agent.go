// Package testagent is a WireKube agent for tests, the benchmarks and the demo
// (the probe, tools/probe, has its own client):
// it speaks to the gateway exactly as the real agent does (docs/spec.md#agent) —
// subprotocol wirekube.relay.v1, `Authorization: Bearer` read from a token
// file at every dial, Register first, Keepalive every 25 s, one binary
// message per frame, a frame over 65,499 bytes split in two messages — and
// also gives raw access (any header, any bytes) for bad-input tests.
package testagent

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/wsstream"
	"github.com/wirekube/relay-ws/relayproto"
)

// DefaultKeepaliveInterval is the real agent's keepalive period.
const DefaultKeepaliveInterval = 25 * time.Second

// splitAt is where the real agent's 64 KiB buffered writer splits a frame.
const splitAt = 65499

// Options configure a dial. The zero value of every optional field matches
// the real agent.
type Options struct {
	URL string // wss://host:port/relay
	// TokenFile is read at every dial and whitespace-trimmed, as the agent
	// does with its projected token. Token is used when TokenFile is empty;
	// with neither, no Authorization header is sent.
	TokenFile string
	Token     string
	TLS       *tls.Config
	// Header adds or overrides request headers (spoofing and bad-input tests).
	Header http.Header
	// Subprotocols defaults to [wirekube.relay.v1]; set to an empty non-nil
	// slice to offer none.
	Subprotocols []string
	// KeepaliveInterval defaults to 25 s; negative disables keepalives.
	KeepaliveInterval time.Duration
	HandshakeTimeout  time.Duration // default 10 s
	// NetDialContext, when set, opens the TCP connection (a load generator
	// picking a replica the way a Service would); default net.Dialer (also the in-memory
	// listeners of testing/synctest bubbles).
	NetDialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Proxy picks the forward proxy as gorilla/websocket's Dialer.Proxy
	// does in the agent: nil means http.ProxyFromEnvironment (the agent's
	// mode environment); http.ProxyURL(u) is one explicit proxy.
	Proxy func(*http.Request) (*url.URL, error)
}

// DialError is a refused upgrade: the HTTP answer before any WebSocket.
type DialError struct {
	Status int
	Reason string // X-WireKube-Deny-Reason
	Header http.Header
	Body   string
	Err    error
}

func (e *DialError) Error() string {
	return fmt.Sprintf("agent: upgrade refused: HTTP %d reason %q: %v", e.Status, e.Reason, e.Err)
}

func (e *DialError) Unwrap() error { return e.Err }

// Conn is one WebSocket session. ReadFrame must be called from one goroutine;
// writes are safe for concurrent use.
type Conn struct {
	ws       *websocket.Conn
	Response *http.Response
	rd       *relayproto.Reader

	wmu  sync.Mutex
	stop chan struct{}
	wg   sync.WaitGroup // the keepalive goroutine
	once sync.Once
}

// Dial upgrades, sends Register with key, and starts keepalives.
func Dial(ctx context.Context, o Options, key relayproto.Key) (*Conn, error) {
	c, err := DialRaw(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := c.WriteFrame(relayproto.TypeRegister, key[:]); err != nil {
		c.Close()
		return nil, fmt.Errorf("agent: register: %w", err)
	}
	interval := o.KeepaliveInterval
	if interval == 0 {
		interval = DefaultKeepaliveInterval
	}
	if interval > 0 {
		c.wg.Add(1)
		go c.keepalive(interval)
	}
	return c, nil
}

// DialRaw only upgrades: nothing is sent and no keepalive runs.
func DialRaw(ctx context.Context, o Options) (*Conn, error) {
	header, err := o.header()
	if err != nil {
		return nil, err
	}
	d := websocket.Dialer{
		TLSClientConfig:  o.TLS,
		HandshakeTimeout: o.HandshakeTimeout,
		Subprotocols:     o.Subprotocols,
		Proxy:            o.Proxy,
		NetDialContext:   o.NetDialContext,
	}
	if d.Proxy == nil {
		d.Proxy = http.ProxyFromEnvironment
	}
	if d.HandshakeTimeout == 0 {
		d.HandshakeTimeout = 10 * time.Second
	}
	if d.Subprotocols == nil {
		d.Subprotocols = []string{contract.Subprotocol}
	}
	ws, resp, err := d.DialContext(ctx, o.URL, header)
	if err != nil {
		return nil, dialError(resp, err)
	}
	c := &Conn{ws: ws, Response: resp, stop: make(chan struct{})}
	c.rd = relayproto.NewReader(wsstream.NewReader(ws))
	return c, nil
}

func (o Options) header() (http.Header, error) {
	h := http.Header{}
	token := o.Token
	if o.TokenFile != "" {
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("agent: token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	for k, vs := range o.Header {
		h[k] = append([]string(nil), vs...)
	}
	return h, nil
}

func dialError(resp *http.Response, err error) error {
	if resp == nil {
		return fmt.Errorf("agent: dial: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return &DialError{
		Status: resp.StatusCode, Reason: resp.Header.Get(contract.HeaderDenyReason),
		Header: resp.Header, Body: string(body), Err: err,
	}
}

// Subprotocol is the subprotocol the server selected.
func (c *Conn) Subprotocol() string { return c.ws.Subprotocol() }

// WriteFrame writes one frame as the agent does: one binary message, or two
// when the encoded frame is over 65,499 bytes.
func (c *Conn) WriteFrame(t relayproto.FrameType, body []byte) error {
	b := relayproto.AppendFrame(nil, t, body)
	if len(b) > splitAt {
		return c.WriteMessages(b[:splitAt], b[splitAt:])
	}
	return c.WriteMessages(b)
}

// SendData sends a Data frame to dst.
func (c *Conn) SendData(dst relayproto.Key, payload []byte) error {
	return c.WriteFrame(relayproto.TypeData, append(dst[:len(dst):len(dst)], payload...))
}

// WriteMessages writes each argument as one binary message, whatever bytes
// it holds (bad-input tests).
func (c *Conn) WriteMessages(msgs ...[]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for _, m := range msgs {
		c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if err := c.ws.WriteMessage(websocket.BinaryMessage, m); err != nil {
			return fmt.Errorf("agent: write: %w", err)
		}
	}
	return nil
}

// WriteText writes a text message (which the gateway must refuse).
func (c *Conn) WriteText(s string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.WriteMessage(websocket.TextMessage, []byte(s))
}

// ReadFrame reads the next frame of the byte stream formed by the binary
// messages; frames may span messages. The body is a copy. A close from the
// server returns a *websocket.CloseError (see CloseOf).
func (c *Conn) ReadFrame(timeout time.Duration) (relayproto.Frame, error) {
	c.ws.SetReadDeadline(time.Now().Add(timeout))
	f, err := c.rd.ReadFrame()
	if err != nil {
		return relayproto.Frame{}, err
	}
	return relayproto.Frame{Type: f.Type, Body: bytes.Clone(f.Body)}, nil
}

// ReadData reads frames until a Data frame arrives (skipping the relay's
// keepalive-like chatter) and returns its source key and payload.
func (c *Conn) ReadData(timeout time.Duration) (relayproto.Key, []byte, error) {
	deadline := time.Now().Add(timeout)
	for {
		f, err := c.ReadFrame(time.Until(deadline))
		if err != nil {
			return relayproto.Key{}, nil, err
		}
		if f.Type != relayproto.TypeData {
			continue
		}
		return relayproto.ParseData(f.Body)
	}
}

// WaitClose reads until the server closes and returns its close frame.
func (c *Conn) WaitClose(timeout time.Duration) (*websocket.CloseError, error) {
	deadline := time.Now().Add(timeout)
	for {
		_, err := c.ReadFrame(time.Until(deadline))
		if err == nil {
			continue
		}
		if ce := CloseOf(err); ce != nil {
			return ce, nil
		}
		return nil, err
	}
}

// CloseOf extracts the WebSocket close frame from a read error, or nil.
func CloseOf(err error) *websocket.CloseError {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}

func (c *Conn) keepalive(interval time.Duration) {
	defer c.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			if c.WriteFrame(relayproto.TypeKeepalive, nil) != nil {
				return
			}
		}
	}
}

// Abort closes the TCP connection without a close frame, as the real agent
// ends a session, and waits for the keepalive goroutine.
func (c *Conn) Abort() {
	c.once.Do(func() {
		close(c.stop)
		_ = c.ws.NetConn().Close()
		c.wg.Wait()
	})
}

// Close sends a normal close, closes the socket and waits for the keepalive
// goroutine.
func (c *Conn) Close() error {
	var err error
	c.once.Do(func() {
		close(c.stop)
		c.wmu.Lock()
		c.ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		c.wmu.Unlock()
		err = c.ws.Close()
		c.wg.Wait()
	})
	return err
}
