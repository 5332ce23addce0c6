package stack

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
)

// HeadRecorder is a loopback TCP forwarder placed between a front proxy and
// one of its upstreams (extauthz's HTTP mode, the bridge). It forwards every
// byte unchanged and records the head of each HTTP/1.1 request it sees, so a
// test can assert what the proxy really sent: which headers reached the auth
// service and the bridge, with which values. Parsing stops on a connection
// after a request that asks for an upgrade (what follows is WebSocket
// frames), and on the first parse error; forwarding never stops early.
type HeadRecorder struct {
	Addr   string // listen address (host:port) to point the proxy at
	target string
	raw    bool // StartForwarder: never parse (TLS, HTTP/2)

	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	heads []RecordedHead
	conns map[net.Conn]struct{}
}

// RecordedHead is one request head as the upstream received it.
type RecordedHead struct {
	Method, Target string
	Header         http.Header // canonicalized names, every value in order
}

// StartHeadRecorder listens on a fresh loopback port and forwards to target.
func StartHeadRecorder(target string) (*HeadRecorder, error) { return startRecorder(target, false) }

// StartForwarder is a HeadRecorder that records nothing: a plain loopback
// forwarder for a protocol that is not HTTP/1.1 (a TLS link, gRPC), with
// SetTarget to redirect or cut it.
func StartForwarder(target string) (*HeadRecorder, error) { return startRecorder(target, true) }

func startRecorder(target string, raw bool) (*HeadRecorder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	r := &HeadRecorder{Addr: ln.Addr().String(), target: target, raw: raw, ln: ln, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept() // owned: Close waits
	return r, nil
}

// Mark returns a position; Since(mark) returns the heads recorded after it.
func (r *HeadRecorder) Mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.heads)
}

// Since returns a copy of the heads recorded after mark.
func (r *HeadRecorder) Since(mark int) []RecordedHead {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]RecordedHead(nil), r.heads[mark:]...)
}

// Close stops accepting, closes every forwarded connection and waits for
// the goroutines.
func (r *HeadRecorder) Close() error {
	err := r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

func (r *HeadRecorder) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go r.forward(c) // owned: Close closes c and waits
	}
}

func (r *HeadRecorder) track(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
}

func (r *HeadRecorder) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		delete(r.conns, c)
		c.Close()
	}
}

// forward pipes both directions. Client-to-upstream bytes pass through the
// head parser first: a request head is recorded before any of its bytes are
// forwarded, so when the client sees the answer its head is in the record.
func (r *HeadRecorder) forward(client net.Conn) {
	defer r.wg.Done()
	r.mu.Lock()
	target := r.target
	r.mu.Unlock()
	if target == "" {
		client.Close()
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		client.Close()
		return
	}
	r.track(client, up)
	defer r.untrack(client, up)
	back := make(chan struct{})
	go func() { // owned: we wait on back below
		defer close(back)
		io.Copy(client, up)
		client.Close()
	}()
	if r.raw || r.relayHeads(client, up) == nil {
		io.Copy(up, client) // after an upgrade or a parse error: raw bytes
	}
	if tc, ok := up.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	<-back
}

// relayHeads reads requests from client, records each head, and forwards
// exactly the bytes read so far (raw, unchanged) before reading on. It
// returns nil when the rest of the stream is to be copied raw (an upgrade
// request or bytes that are no HTTP/1.1), or the error that ended it.
func (r *HeadRecorder) relayHeads(client, up net.Conn) error {
	var raw bytes.Buffer
	br := bufio.NewReader(io.TeeReader(client, &raw))
	flush := func() error {
		_, err := up.Write(raw.Bytes())
		raw.Reset()
		return err
	}
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			if flush() != nil || errors.Is(err, io.EOF) {
				return io.EOF // the client is done, or the upstream is gone
			}
			return nil
		}
		r.record(req)
		if err := flush(); err != nil {
			return err
		}
		if len(req.Header.Values("Upgrade")) > 0 {
			return nil
		}
		_, err = io.Copy(io.Discard, req.Body)
		req.Body.Close()
		if ferr := flush(); ferr != nil {
			return ferr
		}
		if err != nil {
			return nil
		}
	}
}

func (r *HeadRecorder) record(req *http.Request) {
	h := req.Header.Clone()
	if req.Host != "" {
		h["Host"] = []string{req.Host}
	}
	r.mu.Lock()
	r.heads = append(r.heads, RecordedHead{Method: req.Method, Target: req.RequestURI, Header: h})
	r.mu.Unlock()
}

// SetTarget points new connections at target and closes the current ones,
// so a proxy's pooled connections follow too. An empty target refuses every
// connection: a cut link.
func (r *HeadRecorder) SetTarget(target string) {
	r.mu.Lock()
	r.target = target
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
}
