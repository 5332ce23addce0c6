package bridge

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wirekube/relay-ws/internal/test/refrelay"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

// relayIPs are the "relay Pods" behind one name: loopback addresses that
// all route to lo on Linux, each with its own listener on one shared port.
var relayIPs = []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}

// listenSamePort opens a real TCP listener on every ip, all on one port (as
// relay Pods behind a headless Service share 3478). Closed at cleanup.
func listenSamePort(t *testing.T, ips []string) (string, []net.Listener) {
	t.Helper()
	for range 20 {
		first, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(first.Addr().String())
		lns := []net.Listener{first}
		for _, ip := range ips[1:] {
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, port))
			if err != nil {
				break // port taken on that address: try another port
			}
			lns = append(lns, ln)
		}
		if len(lns) == len(ips) {
			t.Cleanup(func() {
				for _, ln := range lns {
					ln.Close()
				}
			})
			return port, lns
		}
		for _, ln := range lns {
			ln.Close()
		}
	}
	t.Fatal("no port free on every relay address")
	return "", nil
}

// fixedResolver answers every lookup of the test name with addrs (in the
// order given: the dialer must not depend on it) or err.
type fixedResolver struct {
	mu    sync.Mutex
	addrs []string
	err   error
	calls int
}

func (r *fixedResolver) set(addrs []string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addrs, r.err = addrs, err
}

func (r *fixedResolver) lookup(_ context.Context, host string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if host != "relay.test" {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return slices.Clone(r.addrs), r.err
}

// acceptedBy dials once through d and reports which listener index took
// the connection (the server side's local address says so).
func acceptedBy(t *testing.T, d *relayDialer, ctx context.Context) (string, error) {
	t.Helper()
	c, err := d.dial(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close()
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	return host, nil
}

func newTestDialer(t *testing.T, port string, res *fixedResolver,
	dial func(context.Context, string, string) (net.Conn, error)) (*relayDialer, *dialMetrics) {
	t.Helper()
	m, err := newDialMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	d, err := newRelayDialer(net.JoinHostPort("relay.test", port), res.lookup, dial, time.Second, m)
	if err != nil {
		t.Fatal(err)
	}
	return d, m
}

func TestRelayDialerRotatesOverSortedAddresses(t *testing.T) {
	port, _ := listenSamePort(t, relayIPs)
	res := &fixedResolver{addrs: []string{"127.0.0.3", "127.0.0.1", "127.0.0.2"}}
	d, m := newTestDialer(t, port, res, nil)
	var got []string
	for range 6 {
		host, err := acceptedBy(t, d, t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, host)
	}
	want := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.1", "127.0.0.2", "127.0.0.3"}
	if !slices.Equal(got, want) {
		t.Fatalf("dials went to %v, want %v (sorted, rotated by one per dial)", got, want)
	}
	if res.calls != 1 {
		t.Errorf("%d lookups for 6 dials within the resolve TTL, want 1", res.calls)
	}
	if n := promtest.ToFloat64(m.addresses); n != 3 {
		t.Errorf("relay_addresses = %v, want 3", n)
	}
	if n := promtest.ToFloat64(m.attempts.WithLabelValues(dialOK)); n != 6 {
		t.Errorf("ok attempts = %v, want 6", n)
	}
}

func TestRelayDialerFailsOverAndOrdersFailedLast(t *testing.T) {
	port, lns := listenSamePort(t, relayIPs)
	lns[1].Close() // 127.0.0.2 is gone: refused
	res := &fixedResolver{addrs: relayIPs}
	d, m := newTestDialer(t, port, res, nil)
	clock := testutil.NewClock(time.Unix(1000, 0))
	d.now = clock.Now

	var got []string
	for range 4 {
		host, err := acceptedBy(t, d, t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, host)
	}
	// Dial 2 starts at .2, is refused and fails over to .3; from then on .2
	// sorts last, so no later dial tries it while it is marked failed.
	want := []string{"127.0.0.1", "127.0.0.3", "127.0.0.3", "127.0.0.1"}
	if !slices.Equal(got, want) {
		t.Fatalf("dials went to %v, want %v", got, want)
	}
	if n := promtest.ToFloat64(m.attempts.WithLabelValues(dialRefused)); n != 1 {
		t.Errorf("refused attempts = %v, want 1 (the failed address is tried again only after failTTL)", n)
	}
	clock.Advance(d.failTTL)
	if order := d.order(d.addrs); !slices.Equal(order, []string{"127.0.0.2", "127.0.0.3", "127.0.0.1"}) {
		t.Errorf("after failTTL the order is %v, want the plain rotation again", order)
	}
}

func TestRelayDialerPerAddressTimeout(t *testing.T) {
	port, _ := listenSamePort(t, relayIPs)
	real := &net.Dialer{}
	// 127.0.0.1 hangs (a Pod that vanished without a RST): the per-address
	// deadline ends that attempt and the next address answers.
	hang := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, _ := net.SplitHostPort(addr); host == "127.0.0.1" {
			<-ctx.Done()
			return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
		}
		return real.DialContext(ctx, network, addr)
	}
	res := &fixedResolver{addrs: relayIPs}
	d, m := newTestDialer(t, port, res, hang)
	d.perAddr = 50 * time.Millisecond
	host, err := acceptedBy(t, d, t.Context())
	if err != nil || host != "127.0.0.2" {
		t.Fatalf("dial = %q, %v; want 127.0.0.2 after the hanging address timed out", host, err)
	}
	if n := promtest.ToFloat64(m.attempts.WithLabelValues(dialTimeout)); n != 1 {
		t.Errorf("timeout attempts = %v, want 1", n)
	}
	// The caller giving up is not the address's fault.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := d.dial(ctx); !errors.Is(err, ErrRelayUnreachable) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled dial: %v, want ErrRelayUnreachable wrapping context.Canceled", err)
	}
}

func TestRelayDialerResolution(t *testing.T) {
	port, _ := listenSamePort(t, relayIPs[:1])
	tests := []struct {
		name      string
		first     error // first lookup's error
		second    error // lookup after the TTL
		wantOK    bool  // second dial succeeds
		wantStale float64
	}{
		{"dns outage reuses the last answer", nil, errors.New("server misbehaving"), true, 1},
		{"no answer ever", errors.New("no such host"), errors.New("no such host"), false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := &fixedResolver{addrs: relayIPs[:1], err: tt.first}
			d, m := newTestDialer(t, port, res, nil)
			clock := testutil.NewClock(time.Unix(1000, 0))
			d.now = clock.Now
			_, _ = acceptedBy(t, d, t.Context())
			clock.Advance(d.resolveTTL)
			res.set(nil, tt.second)
			_, err := acceptedBy(t, d, t.Context())
			if (err == nil) != tt.wantOK {
				t.Fatalf("dial after the TTL: %v, want ok=%v", err, tt.wantOK)
			}
			if err != nil && !errors.Is(err, ErrRelayUnreachable) {
				t.Errorf("error %v does not wrap ErrRelayUnreachable", err)
			}
			if n := promtest.ToFloat64(m.resolves.WithLabelValues(resolveStale)); n != tt.wantStale {
				t.Errorf("stale resolutions = %v, want %v", n, tt.wantStale)
			}
			if res.calls != 2 {
				t.Errorf("%d lookups, want 2 (one per TTL)", res.calls)
			}
		})
	}
}

func TestRelayDialerIPLiteralIsNotResolved(t *testing.T) {
	res := &fixedResolver{}
	m, _ := newDialMetrics(prometheus.NewRegistry())
	d, err := newRelayDialer(testutil.ClosedAddr(t), res.lookup, (&net.Dialer{}).DialContext, time.Second, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.dial(t.Context()); !errors.Is(err, ErrRelayUnreachable) {
		t.Fatalf("dial a closed port: %v, want ErrRelayUnreachable", err)
	}
	if res.calls != 0 {
		t.Errorf("an IP literal was looked up %d times", res.calls)
	}
}

// startRelayAt serves a reference relay on ln until the test ends, or until
// the returned stop is called.
func startRelayAt(t *testing.T, ln net.Listener) (*refrelay.Server, func()) {
	t.Helper()
	srv, err := refrelay.New(refrelay.Options{DisableUDP: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("relay serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return srv, stop
}

// TestBridgeSpreadsSessionsOverRelayPods runs the bridge against three
// reference relays behind one name: sessions spread over them, /readyz
// stays ready while one answers and fails when none does.
func TestBridgeSpreadsSessionsOverRelayPods(t *testing.T) {
	port, lns := listenSamePort(t, relayIPs)
	var relays []*refrelay.Server
	var stops []func()
	for _, ln := range lns {
		srv, stop := startRelayAt(t, ln)
		relays, stops = append(relays, srv), append(stops, stop)
	}
	res := &fixedResolver{addrs: relayIPs}
	h := startBridge(t, func(o *Options) {
		o.RelayAddr = "relay.test:" + port
		o.ResolveRelay = res.lookup
	})
	// Sorted and rotated: session i lands on relay Pod i.
	for i, r := range relays {
		registerOn(t, h, r, testKey(byte(10+i)))
	}
	stops[0]()
	stops[1]()
	forgetReady(h)
	if code := readyz(h); code != http.StatusOK {
		t.Fatalf("/readyz with one relay Pod left = %d, want 200", code)
	}
	registerOn(t, h, relays[2], testKey(20)) // the only Pod left

	stops[2]()
	forgetReady(h)
	if code := readyz(h); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with no relay Pod = %d, want 503", code)
	}
	failed := promtest.ToFloat64(h.srv.relay.observe.(*dialMetrics).attempts.WithLabelValues(dialRefused))
	if failed < 3 {
		t.Errorf("refused attempts = %v, want at least 3", failed)
	}
}

// registerOn opens a session as k and waits until relay r has its Register.
func registerOn(t *testing.T, h *harness, r *refrelay.Server, k relayproto.Key) {
	t.Helper()
	ws := h.dial(t, identity(k))
	t.Cleanup(func() { ws.Close() })
	send(t, ws, relayproto.AppendRegister(nil, k))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := r.WaitRegistered(ctx, k); err != nil {
		t.Fatalf("key %s not registered on the expected relay Pod: %v", k, err)
	}
}

// forgetReady drops the cached readiness so the next /readyz probes.
func forgetReady(h *harness) {
	h.srv.ready.mu.Lock()
	h.srv.ready.ok, h.srv.ready.tried = time.Time{}, time.Time{}
	h.srv.ready.mu.Unlock()
}

func readyz(h *harness) int {
	w := httptest.NewRecorder()
	h.srv.AdminHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return w.Code
}
