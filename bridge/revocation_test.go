package bridge

import (
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"

	"github.com/wirekube/relay-ws/bridge/internal/revocationclient"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

// fakeWatch is extauthz's end of the revocation stream: it records the
// bindings each stream holds and lets the test revoke or hang up.
type fakeWatch struct {
	mu         sync.Mutex
	bindings   map[uint64]string // of the current stream
	acked      int               // lists acknowledged
	streams    chan grpc.ServerStream
	hangup     chan struct{}
	addr       string // unix:/path of its listener
	secret     string // required on every call
	secretFile string
}

// use points o at f: its socket and its secret file.
func (f *fakeWatch) use(o *Options) {
	o.RevocationAddr, o.RevocationSecretFile = f.addr, f.secretFile
}

func (f *fakeWatch) Watch(stream grpc.ServerStream) error {
	f.mu.Lock()
	f.bindings = map[uint64]string{}
	hangup := f.hangup
	f.mu.Unlock()
	f.streams <- stream
	errc := make(chan error, 1)
	go func() {
		for {
			ops, err := revocation.RecvFromBridge(stream)
			if err != nil {
				errc <- err
				return
			}
			f.apply(stream, ops)
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-hangup:
		return nil
	}
}

func (f *fakeWatch) apply(stream grpc.ServerStream, ops []revocation.Op) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, op := range ops {
		switch op.Kind {
		case revocation.KindAdd:
			f.bindings[op.ID] = op.Binding
		case revocation.KindRemove:
			delete(f.bindings, op.ID)
		case revocation.KindSynced:
			f.acked++
			_ = revocation.Send(stream, []revocation.Op{{Kind: revocation.KindSyncedAck, ID: op.ID}})
		}
	}
}

func (f *fakeWatch) held() map[uint64]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[uint64]string{}
	for k, v := range f.bindings {
		out[k] = v
	}
	return out
}

// idOf returns the stream id of the binding naming peer.
func (f *fakeWatch) idOf(t *testing.T, peer string) uint64 {
	t.Helper()
	for id, b := range f.held() {
		if pb, _ := revocation.ParseBinding(b); pb.Peer == peer {
			return id
		}
	}
	t.Fatalf("no binding of %s held", peer)
	return 0
}

// startFakeWatch serves f on a Unix socket behind a secret, as extauthz
// does; stop ends the server (the stream is lost, nothing listens).
func startFakeWatch(t *testing.T) (f *fakeWatch, stop func()) {
	t.Helper()
	dir := t.TempDir()
	f = &fakeWatch{streams: make(chan grpc.ServerStream, 16), hangup: make(chan struct{}),
		addr: "unix:" + filepath.Join(dir, "revocation.sock"), secret: revocation.NewSecret(), secretFile: filepath.Join(dir, "secret")}
	must(t, revocation.WriteSecretFile(f.secretFile, f.secret))
	ln, err := net.Listen("unix", strings.TrimPrefix(f.addr, "unix:"))
	must(t, err)
	gs := grpc.NewServer(grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if err := revocation.CheckSecret(ss.Context(), f.secret); err != nil {
			return err
		}
		return h(srv, ss)
	}))
	revocation.Register(gs, f)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(ln) }()
	var once sync.Once
	stop = func() { once.Do(func() { gs.Stop(); <-done }) }
	t.Cleanup(stop)
	return f, stop
}

// boundIdentity is identity(k) for peer with its binding header.
func boundIdentity(peer string, k relayproto.Key) http.Header {
	h := identity(k)
	h.Set(contract.HeaderPeer, peer)
	h.Set(contract.HeaderBinding, revocation.Binding{
		Identity: h.Get(contract.HeaderIdentity), SAUID: "uid-sa", PodName: "agent-" + peer, PodUID: "uid-" + peer,
		NodeName: peer, Peer: peer, KeySHA256: revocation.KeyHash(k[:]),
	}.Format())
	return h
}

func (h *harness) registerAs(t *testing.T, hdr http.Header, k relayproto.Key) *websocket.Conn {
	t.Helper()
	ws := h.dial(t, hdr)
	send(t, ws, relayproto.AppendRegister(nil, k))
	return ws
}

func waitHeld(t *testing.T, f *fakeWatch, n int) {
	t.Helper()
	testutil.Eventually(t, "bindings held by extauthz", func() bool { return len(f.held()) == n })
}

// TestRevocationStream: the list on connect, a revocation closes exactly
// its session with 1008 and the reason, an ended session is removed, and
// after a lost stream the bridge resends the full list.
func TestRevocationStream(t *testing.T) {
	f, _ := startFakeWatch(t)
	h := startBridge(t, f.use)
	h.waitVouching(t)
	a := h.registerAs(t, boundIdentity("node-a", testKey(1)), testKey(1))
	b := h.registerAs(t, boundIdentity("node-b", testKey(2)), testKey(2))
	c := h.registerAs(t, boundIdentity("node-c", testKey(3)), testKey(3))
	d := h.registerAs(t, boundIdentity("node-d", testKey(4)), testKey(4))
	stream := <-f.streams
	waitHeld(t, f, 4)
	testutil.Eventually(t, "stream in sync", func() bool { return promtest.ToFloat64(h.srv.revoker.Connected()) == 1 })
	event := time.Now().Add(-50 * time.Millisecond)
	must(t, revocation.Send(stream, []revocation.Op{{Kind: revocation.KindRevoke, ID: f.idOf(t, "node-b"),
		Reason: string(contract.ReasonPodNotFound), EventUnixNano: event.UnixNano()}}))
	expectClose(t, b, websocket.ClosePolicyViolation, contract.ReasonPodNotFound)
	waitHeld(t, f, 3)
	if n := promtest.CollectAndCount(h.srv.revoker.Lag()); n != 1 {
		t.Fatalf("lag histogram has %d series", n)
	}

	must(t, revocation.Send(stream, []revocation.Op{{Kind: revocation.KindRevoke, ID: f.idOf(t, "node-c"), Reason: "from_a_newer_extauthz"}}))
	expectClose(t, c, websocket.ClosePolicyViolation, contract.CloseRevoked)
	waitHeld(t, f, 2)

	must(t, revocation.Send(stream, []revocation.Op{{Kind: revocation.KindRevoke, ID: f.idOf(t, "node-d"),
		Reason: string(contract.CloseRevocationLimit)}}))
	expectClose(t, d, websocket.ClosePolicyViolation, contract.CloseRevocationLimit)
	waitHeld(t, f, 1)
	// Three revocations (revocation_limit is one), no expiry.
	wantAuthCloses(t, h, map[string]float64{revocationclient.CauseRevoked: 3, revocationclient.CauseTokenExpired: 0, revocationclient.CauseRevocationStale: 0})

	// Hang up: the bridge reconnects and lists what is live (only a).
	f.mu.Lock()
	close(f.hangup)
	f.hangup = make(chan struct{})
	f.mu.Unlock()
	<-f.streams
	waitHeld(t, f, 1)
	f.idOf(t, "node-a")
	testutil.Eventually(t, "two resyncs", func() bool { return promtest.ToFloat64(h.srv.revoker.Resyncs()) == 2 })
	send(t, a, dataFrame(testKey(1), 1, 16))
	fs := &frameStream{t: t, ws: a}
	if fr := fs.next(); fr.Type != relayproto.TypeData {
		t.Fatalf("session a after the resync: %v", fr.Type)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRevocationStale: once extauthz is gone, a session it admitted
// is closed after the stale timeout.
func TestRevocationStale(t *testing.T) {
	f, stop := startFakeWatch(t)
	h := startBridge(t, func(o *Options) {
		f.use(o)
		o.RevocationStaleTimeout = time.Second // Register is written well before
		o.RevocationUnreadyAfter = time.Second
	})
	h.waitVouching(t)
	ws := h.registerAs(t, boundIdentity("node-a", testKey(1)), testKey(1))
	waitHeld(t, f, 1)
	stop()
	expectClose(t, ws, websocket.ClosePolicyViolation, contract.CloseRevocationStale)
	wantAuthCloses(t, h, map[string]float64{revocationclient.CauseRevocationStale: 1, revocationclient.CauseRevoked: 0, revocationclient.CauseTokenExpired: 0})
	if got := promtest.ToFloat64(h.srv.revoker.Connected()); got != 0 {
		t.Fatalf("connected = %v", got)
	}
}

// wantAuthCloses checks wirekube_bridge_authorization_closes_total by cause.
// The closer counts a close after end() has sent the close frame, so the
// client can read the close before the count: wait for the counts first.
func wantAuthCloses(t *testing.T, h *harness, want map[string]float64) {
	t.Helper()
	testutil.Eventually(t, "authorization closes counted", func() bool {
		for cause, n := range want {
			if promtest.ToFloat64(h.srv.revoker.AuthCloses(cause)) != n {
				return false
			}
		}
		return true
	})
	for cause, n := range want {
		if got := promtest.ToFloat64(h.srv.revoker.AuthCloses(cause)); got != n {
			t.Errorf("authorization_closes_total{cause=%q} = %v, want %v", cause, got, n)
		}
	}
}

// TestBindingHeaderRules: with the stream on, the binding is required and
// must agree with the other identity headers.
func TestBindingHeaderRules(t *testing.T) {
	f, _ := startFakeWatch(t)
	h := startBridge(t, f.use)
	h.waitVouching(t)
	k := testKey(1)
	other := boundIdentity("node-b", k).Get(contract.HeaderBinding)
	for _, tc := range []struct {
		name string
		mod  func(http.Header)
	}{
		{"missing", func(hd http.Header) { hd.Del(contract.HeaderBinding) }},
		{"repeated", func(hd http.Header) { hd.Add(contract.HeaderBinding, hd.Get(contract.HeaderBinding)) }},
		{"malformed", func(hd http.Header) { hd.Set(contract.HeaderBinding, "v1;x") }},
		{"other peer", func(hd http.Header) { hd.Set(contract.HeaderBinding, other) }},
		{"other key", func(hd http.Header) { hd.Set(contract.HeaderPublicKey, testKey(2).Base64()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := boundIdentity("node-a", k)
			tc.mod(hdr)
			hdr.Set("Sec-WebSocket-Protocol", contract.Subprotocol)
			d := websocket.Dialer{}
			_, resp, err := d.Dial(h.url, hdr)
			if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden ||
				resp.Header.Get(contract.HeaderDenyReason) != string(contract.ReasonIdentityHeaderInvalid) {
				t.Fatalf("dial: %v, %+v", err, resp)
			}
		})
	}
}

// waitVouching waits until the stream is in sync: before, upgrades are
// refused (revocation_unavailable).
func (h *harness) waitVouching(t *testing.T) {
	t.Helper()
	testutil.Eventually(t, "revocation stream in sync", func() bool { return promtest.ToFloat64(h.srv.revoker.Connected()) == 1 })
}
