package bridge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/singleflight"
)

// ErrRelayUnreachable means no address of --relay-addr accepted a connection.
var ErrRelayUnreachable = errors.New("bridge: no relay address answered")

// relayDialer is the bridge's one path to the raw relay: every session dial
// (dialRelay) and every readiness probe (probeRelay) goes through dial.
//
// Order: the host of --relay-addr is resolved (an IP literal is used as is);
// the addresses are sorted, then rotated by one per dial, so successive
// sessions start at successive relay Pods and spread evenly over them. An
// address that failed within failTTL moves to the end of the order, so a
// Pod that just died costs at most one per-address timeout per failTTL, not
// one per session. Each address gets perAddr; every address is tried at most
// once per dial, and the caller's context bounds the whole dial.
//
// Any relay Pod is correct: with relay clustering (the chart's clusterKube,
// required for more than one replica) the replicas exchange registrations
// and forward frames to the replica holding the destination key over their
// cluster port (TCP 3479, frame types 0x21-0x23), so a session registered on
// one replica reaches peers registered on any other.
//
// Safe for concurrent use.
type relayDialer struct {
	host, port string
	literal    bool // host is an IP address: no resolution
	resolve    func(ctx context.Context, host string) ([]string, error)
	dialer     func(ctx context.Context, network, addr string) (net.Conn, error)
	perAddr    time.Duration
	resolveTTL time.Duration // a resolution is reused this long
	failTTL    time.Duration // a failed address sorts last this long
	now        func() time.Time
	observe    dialObserver

	next  atomic.Uint64 // rotation counter
	group singleflight.Group

	mu       sync.Mutex
	addrs    []string // last good resolution, sorted
	resolved time.Time
	failed   map[string]time.Time
}

// dialObserver receives the outcome of each step; the metrics implement it.
type dialObserver interface {
	resolved(result string, addrs int)
	attempt(result string)
}

func newRelayDialer(addr string, resolve func(context.Context, string) ([]string, error),
	dial func(context.Context, string, string) (net.Conn, error), perAddr time.Duration, obs dialObserver) (*relayDialer, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("relay address: %w", err)
	}
	if resolve == nil {
		resolve = net.DefaultResolver.LookupHost
	}
	_, ipErr := netip.ParseAddr(host)
	return &relayDialer{
		host: host, port: port, literal: ipErr == nil, resolve: resolve, dialer: dial,
		perAddr: perAddr, resolveTTL: 5 * time.Second, failTTL: 10 * time.Second,
		now: time.Now, observe: obs, failed: map[string]time.Time{},
	}, nil
}

// dial connects to one relay address, trying them in the order above. The
// error wraps ErrRelayUnreachable and the last attempt's error.
func (d *relayDialer) dial(ctx context.Context) (net.Conn, error) {
	addrs, err := d.addresses(ctx)
	if err != nil {
		return nil, err
	}
	var last error
	for _, a := range d.order(addrs) {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRelayUnreachable, err)
		}
		c, err := d.attempt(ctx, a)
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, fmt.Errorf("%w (%d addresses): %w", ErrRelayUnreachable, len(addrs), last)
}

// attempt dials one address within perAddr and records the outcome.
func (d *relayDialer) attempt(ctx context.Context, addr string) (net.Conn, error) {
	actx, cancel := context.WithTimeout(ctx, d.perAddr)
	defer cancel()
	c, err := d.dialer(actx, "tcp", net.JoinHostPort(addr, d.port))
	result := classifyDial(ctx, err)
	d.observe.attempt(result)
	d.mu.Lock()
	defer d.mu.Unlock()
	switch result {
	case dialOK:
		delete(d.failed, addr)
	case dialCanceled: // says nothing about the address
	default:
		d.failed[addr] = d.now()
	}
	return c, err
}

// classifyDial names a dial outcome. parent is the caller's context: its end
// is the caller giving up, the per-address deadline is a timeout.
func classifyDial(parent context.Context, err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return dialOK
	case parent.Err() != nil:
		return dialCanceled
	case errors.Is(err, syscall.ECONNREFUSED):
		return dialRefused
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return dialTimeout
	}
	return dialError
}

// addresses returns the sorted addresses of the host, resolving at most
// once per resolveTTL (concurrent callers share one lookup). A failed
// lookup reuses the last good answer, if any: the dials then show whether
// those Pods still answer, and a DNS outage does not refuse every agent.
func (d *relayDialer) addresses(ctx context.Context) ([]string, error) {
	if d.literal {
		return []string{d.host}, nil
	}
	d.mu.Lock()
	if d.addrs != nil && d.now().Sub(d.resolved) < d.resolveTTL {
		addrs := d.addrs
		d.mu.Unlock()
		return addrs, nil
	}
	d.mu.Unlock()
	v, err, _ := d.group.Do("resolve", func() (any, error) { return d.lookup(ctx) })
	if err != nil {
		return nil, err
	}
	return v.([]string), nil
}

func (d *relayDialer) lookup(ctx context.Context) ([]string, error) {
	// Bounded like one address attempt; not cancelled with the first
	// caller, since others share the answer.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(d.perAddr, time.Second))
	defer cancel()
	addrs, err := d.resolve(lctx, d.host)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil && len(addrs) == 0 {
		err = fmt.Errorf("lookup %s: no addresses", d.host)
	}
	if err != nil {
		if d.addrs != nil {
			d.observe.resolved(resolveStale, len(d.addrs))
			return d.addrs, nil
		}
		d.observe.resolved(dialError, 0)
		return nil, fmt.Errorf("%w: %w", ErrRelayUnreachable, err)
	}
	sortAddrs(addrs)
	d.addrs, d.resolved = slices.Compact(addrs), d.now()
	for a := range d.failed { // forget Pods that left the answer
		if !slices.Contains(d.addrs, a) {
			delete(d.failed, a)
		}
	}
	d.observe.resolved(dialOK, len(d.addrs))
	return d.addrs, nil
}

// sortAddrs sorts IP addresses numerically (names, if a resolver returns
// any, after them by text).
func sortAddrs(addrs []string) {
	slices.SortFunc(addrs, func(a, b string) int {
		pa, ea := netip.ParseAddr(a)
		pb, eb := netip.ParseAddr(b)
		switch {
		case ea == nil && eb == nil:
			return pa.Compare(pb)
		case ea == nil:
			return -1
		case eb == nil:
			return 1
		}
		return cmp.Compare(a, b)
	})
}

// order rotates addrs by the dial counter and moves recently failed
// addresses to the end, keeping their rotated order.
func (d *relayDialer) order(addrs []string) []string {
	n := len(addrs)
	start := int((d.next.Add(1) - 1) % uint64(n))
	healthy := make([]string, 0, n)
	var failed []string
	now := d.now()
	d.mu.Lock()
	for i := range n {
		a := addrs[(start+i)%n]
		if t, ok := d.failed[a]; ok && now.Sub(t) < d.failTTL {
			failed = append(failed, a)
			continue
		}
		delete(d.failed, a)
		healthy = append(healthy, a)
	}
	d.mu.Unlock()
	return append(healthy, failed...)
}

// dialRelay opens the session's relay connection before the upgrade.
func (s *Server) dialRelay(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, min(s.cfg.WriteTimeout, 5*time.Second))
	defer cancel()
	start := time.Now()
	c, err := s.relay.dial(ctx)
	s.metrics.observeDial(time.Since(start), err)
	if err != nil {
		return nil, fmt.Errorf("dial relay: %w", err)
	}
	s.ready.markOK()
	return c, nil
}

// probeRelay dials the relay once and closes the connection at once: the
// readiness check and the held requests' redial loop (hold.go).
func (s *Server) probeRelay(ctx context.Context) error {
	start := time.Now()
	c, err := s.relay.dial(ctx)
	s.metrics.observeDial(time.Since(start), err)
	if err != nil {
		return err
	}
	return c.Close()
}
