package datapath

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// naiveGateway is the baseline the bridge is measured against: the
// straightforward single-process WebSocket-to-TCP gateway. gorilla's
// Upgrader with its default buffers, one relay connection per session,
// NextReader + io.Copy from the client to the relay, and a reader goroutine
// that writes one message per relay frame. It checks nothing (no identity,
// no Register rule): it only carries bytes, so its cost is the floor of
// what any gateway design pays, not a straw man. With tlsConf set it
// terminates TLS itself (crypto/tls), the single-process alternative to a
// TLS front plus the bridge.
type naiveGateway struct {
	relayAddr string
	upgrader  websocket.Upgrader
}

func newNaiveGateway(relayAddr string) *naiveGateway {
	return &naiveGateway{relayAddr: relayAddr, upgrader: websocket.Upgrader{
		Subprotocols: []string{contract.Subprotocol},
		CheckOrigin:  func(*http.Request) bool { return true },
	}}
}

// serve runs the gateway on ln until ctx is done.
func (g *naiveGateway) serve(ctx context.Context, ln net.Listener, tlsConf *tls.Config) error {
	mux := http.NewServeMux()
	mux.HandleFunc(contract.DefaultRelayPath, g.handle)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsConf}
	go func() { <-ctx.Done(); hs.Close() }()
	var err error
	if tlsConf != nil {
		err = hs.ServeTLS(ln, "", "")
	} else {
		err = hs.Serve(ln)
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (g *naiveGateway) handle(w http.ResponseWriter, r *http.Request) {
	relay, err := net.Dial("tcp", g.relayAddr)
	if err != nil {
		http.Error(w, "relay unavailable", http.StatusServiceUnavailable)
		return
	}
	ws, err := g.upgrader.Upgrade(w, r, nil)
	if err != nil {
		relay.Close()
		return
	}
	go g.relayToClient(ws, relay)
	for {
		_, msg, err := ws.NextReader()
		if err != nil {
			break
		}
		if _, err := io.Copy(relay, msg); err != nil {
			break
		}
	}
	relay.Close()
	ws.Close()
}

func (g *naiveGateway) relayToClient(ws *websocket.Conn, relay net.Conn) {
	defer ws.Close()
	defer relay.Close()
	fr := relayproto.NewReader(bufio.NewReader(relay))
	var msg []byte
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		msg = relayproto.AppendFrame(msg[:0], f.Type, f.Body)
		if err := ws.WriteMessage(websocket.BinaryMessage, msg); err != nil {
			return
		}
	}
}
