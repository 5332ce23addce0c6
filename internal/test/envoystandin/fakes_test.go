package envoystandin

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"

	"github.com/wirekube/relay-ws/internal/contract"
)

// allowAll is an extauthz that allows every Check with X-WireKube-Peer
// "peer-from-extauthz" and counts its calls.
type allowAll struct {
	authv3.UnimplementedAuthorizationServer
	calls atomic.Int64
}

const extauthzPeer = "peer-from-extauthz"

func (a *allowAll) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	a.calls.Add(1)
	return &authv3.CheckResponse{Status: &status.Status{Code: 0}, HttpResponse: &authv3.CheckResponse_OkResponse{
		OkResponse: &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{{
			Header:       &corev3.HeaderValue{Key: contract.HeaderPeer, Value: extauthzPeer},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		}}},
	}}, nil
}

func startAllowAll(t *testing.T) (*allowAll, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &allowAll{}
	gs := grpc.NewServer()
	authv3.RegisterAuthorizationServer(gs, a)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); gs.Serve(ln) }() // owned: stopped in Cleanup
	t.Cleanup(func() { gs.Stop(); wg.Wait() })
	return a, ln.Addr().String()
}

// peerBridge answers 200 and records the X-WireKube-Peer of each request.
type peerBridge struct {
	mu    sync.Mutex
	peers []string
}

func (b *peerBridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.peers = append(b.peers, r.Header.Get(contract.HeaderPeer))
	b.mu.Unlock()
}

func (b *peerBridge) seen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.peers...)
}

func newAllowingServer(t *testing.T, bridge http.Handler, o Options) (*Server, *allowAll) {
	t.Helper()
	a, addr := startAllowAll(t)
	up := httptest.NewServer(bridge)
	t.Cleanup(up.Close)
	o.TLS, o.ExtauthzGRPC, o.Bridge, o.Logger = &tls.Config{}, addr, up.Listener.Addr().String(), slog.New(slog.DiscardHandler)
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.closeConn)
	return s, a
}
