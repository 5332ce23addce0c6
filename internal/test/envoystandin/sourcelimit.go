package envoystandin

import (
	"container/list"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
)

// relaySourceLimit reads the relay route's per-source limit from the shipped
// envoy/envoy.yaml (envoyconfig.RelaySourceLimit).
func relaySourceLimit() (envoyconfig.SourceLimit, error) {
	b, err := envoyconfig.LoadShipped(envoyconfig.TLSConfig)
	if err != nil {
		return envoyconfig.SourceLimit{}, err
	}
	return envoyconfig.RelaySourceLimit(b, "relay_tls")
}

// sourceLimiter models the relay route's local rate limit with a blank-valued
// remote_address descriptor: one token bucket per client address, each
// starting full, refilled at PerFill tokens per FillInterval up to Burst; at
// most Buckets addresses are tracked, the least recently used forgotten
// (max_dynamic_descriptors: a forgotten address starts full again). It is
// safe for concurrent use.
type sourceLimiter struct {
	lim  envoyconfig.SourceLimit
	now  func() time.Time
	mu   sync.Mutex
	lru  *list.List // of *sourceBucket, most recent first
	byIP map[string]*list.Element
}

type sourceBucket struct {
	addr   string
	tokens float64
	at     time.Time
}

func newSourceLimiter(lim envoyconfig.SourceLimit) *sourceLimiter {
	return &sourceLimiter{lim: lim, now: time.Now, lru: list.New(), byIP: map[string]*list.Element{}}
}

// allow takes a token of addr's bucket. When there is none it returns false
// and the whole seconds until there is one (at least 1), as Envoy's
// enable_retry_after_header.
func (l *sourceLimiter) allow(addr string) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.bucket(addr, now)
	rate := float64(l.lim.PerFill) / l.lim.FillInterval.Seconds() // tokens a second
	b.tokens = math.Min(float64(l.lim.Burst), b.tokens+now.Sub(b.at).Seconds()*rate)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, max(1, int(math.Ceil((1-b.tokens)/rate)))
}

// bucket returns addr's bucket, marked most recently used, creating a full
// one (and forgetting the least recently used beyond Buckets) if needed.
func (l *sourceLimiter) bucket(addr string, now time.Time) *sourceBucket {
	if e, ok := l.byIP[addr]; ok {
		l.lru.MoveToFront(e)
		return e.Value.(*sourceBucket)
	}
	b := &sourceBucket{addr: addr, tokens: float64(l.lim.Burst), at: now}
	l.byIP[addr] = l.lru.PushFront(b)
	for uint32(l.lru.Len()) > l.lim.Buckets {
		last := l.lru.Back()
		delete(l.byIP, last.Value.(*sourceBucket).addr)
		l.lru.Remove(last)
	}
	return b
}

// allowSource is the relay route's local rate limit as Envoy's filter runs
// it (source/extensions/filters/http/local_ratelimit/local_ratelimit.cc,
// Filter::decodeHeaders): a request it is not enabled for continues at once,
// uncounted and taking no token; an enabled one takes a token of its
// address's bucket. filter_enforced is 100 % in the shipped files.
func (s *Server) allowSource(r *http.Request) (bool, int) {
	if !s.opts.SourceLimit.Enabled {
		return true, 0
	}
	return s.sources.allow(clientAddr(r))
}

// sourceRateLimited is Envoy's local rate limit answer with envoy.yaml's
// response_headers_to_add: 429, the reason, Cache-Control: no-store and
// Retry-After. The body is Envoy's own.
func sourceRateLimited(w http.ResponseWriter, retryAfter int) {
	h := w.Header()
	h.Set(contract.HeaderDenyReason, string(contract.ReasonSourceRateLimited))
	h.Set("Cache-Control", "no-store")
	h.Set("Retry-After", strconv.Itoa(retryAfter))
	h.Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte("local_rate_limited"))
}

// clientAddr is the address the TLS listener trusts (xff_num_trusted_hops 0):
// the socket peer.
// appendForwardedFor appends the connection's address to x-forwarded-for,
// as Envoy does with envoy.yaml's use_remote_address: true (and
// skip_xff_append unset): what a client sent stays to the left of it.
func appendForwardedFor(r *http.Request) {
	prior := strings.Join(r.Header.Values("X-Forwarded-For"), ",")
	if prior != "" {
		prior += ","
	}
	r.Header.Set("X-Forwarded-For", prior+clientAddr(r))
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
