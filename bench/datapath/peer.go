package datapath

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/wsstream"
	"github.com/wirekube/relay-ws/relayproto"
)

// peer is one registered relay client, either direct TCP or WebSocket
// through the bridge. send writes one whole frame; recv reads the next.
// send and recv may run concurrently with each other, not with themselves.
type peer interface {
	send(frame []byte) error
	recv() (relayproto.Frame, error)
	setDeadline(t time.Time)
	close()
}

type tcpPeer struct {
	conn net.Conn
	fr   *relayproto.Reader
}

func dialTCP(ctx context.Context, addr string, k relayproto.Key) (*tcpPeer, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial relay: %w", err)
	}
	p := &tcpPeer{conn: conn, fr: relayproto.NewReader(bufio.NewReaderSize(conn, 64<<10))}
	if err := p.send(relayproto.AppendRegister(nil, k)); err != nil {
		conn.Close()
		return nil, err
	}
	return p, nil
}

func (p *tcpPeer) send(frame []byte) error         { _, err := p.conn.Write(frame); return err }
func (p *tcpPeer) recv() (relayproto.Frame, error) { return p.fr.ReadFrame() }
func (p *tcpPeer) setDeadline(t time.Time)         { _ = p.conn.SetDeadline(t) }
func (p *tcpPeer) close()                          { p.conn.Close() }

// wsPeer writes one frame per binary message, as the agent does, and reads
// the incoming messages as one byte stream.
type wsPeer struct {
	ws *websocket.Conn
	fr *relayproto.Reader
}

// identityHeaders are what the proxy would set after ext_authz allowed k,
// and the bench's stand-in token for k (see startBenchAuth) for a path
// through nginx, which replaces the identity headers with its auth answer.
func identityHeaders(k relayproto.Key) http.Header {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+k.Base64())
	h.Set(contract.HeaderPeer, "bench-"+k.Fingerprint())
	h.Set(contract.HeaderPublicKey, k.Base64())
	h.Set(contract.HeaderIdentity, "system:serviceaccount:wirekube-system:bench")
	h.Set(contract.HeaderTokenExpires, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	return h
}

func dialWS(ctx context.Context, url string, k relayproto.Key, bufSize int, tlsConf *tls.Config) (*wsPeer, error) {
	d := websocket.Dialer{Subprotocols: []string{contract.Subprotocol}, ReadBufferSize: bufSize, WriteBufferSize: bufSize,
		TLSClientConfig: tlsConf, HandshakeTimeout: 30 * time.Second}
	ws, resp, err := d.DialContext(ctx, url, identityHeaders(k))
	if err != nil {
		if resp != nil {
			err = fmt.Errorf("%w (status %d %s)", err, resp.StatusCode, resp.Header.Get(contract.HeaderDenyReason))
		}
		return nil, fmt.Errorf("dial bridge: %w", err)
	}
	p := &wsPeer{ws: ws, fr: relayproto.NewReader(bufio.NewReaderSize(wsstream.NewReader(ws), 64<<10))}
	if err := p.send(relayproto.AppendRegister(nil, k)); err != nil {
		ws.Close()
		return nil, err
	}
	return p, nil
}

func (p *wsPeer) send(frame []byte) error         { return p.ws.WriteMessage(websocket.BinaryMessage, frame) }
func (p *wsPeer) recv() (relayproto.Frame, error) { return p.fr.ReadFrame() }
func (p *wsPeer) close()                          { p.ws.Close() }
func (p *wsPeer) setDeadline(t time.Time) {
	_ = p.ws.SetReadDeadline(t)
	_ = p.ws.SetWriteDeadline(t)
}
