package extauthz

import (
	"container/list"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// FailureLimitOptions bound the failed checks of one client address.
//
// The limit counts only checks that fail on what the client itself sent
// (400 and 401: no token, a malformed, forged, expired or wrong-audience
// token, a request that is no WebSocket upgrade) and it only ever turns
// such a failure into 429 source_rate_limited. A check that passes is never
// counted and never refused by it, so a stranger flooding from the address
// every agent shares (kube-proxy SNAT, a load balancer without client
// address preservation, one NAT gateway) cannot lock one agent out.
type FailureLimitOptions struct {
	// SourceFailureBurst is how many failed checks one client address may
	// make at once before its failures are answered source_rate_limited.
	// Default 200; 0 turns the limit off.
	SourceFailureBurst int
	// SourceFailureRate refills an address's failures per second. Default 20.
	SourceFailureRate float64
	// SourceFailureAddresses bounds the addresses tracked at once; the least
	// recently seen is forgotten (and starts full again). Default 25000.
	SourceFailureAddresses int
}

// DefaultFailureLimitOptions are the defaults documented on the fields.
func DefaultFailureLimitOptions() FailureLimitOptions {
	return FailureLimitOptions{SourceFailureBurst: 200, SourceFailureRate: 20, SourceFailureAddresses: 25000}
}

// AddFlags registers one flag per field on fs, with o's values as defaults.
func (o *FailureLimitOptions) AddFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.SourceFailureBurst, "source-failure-burst", o.SourceFailureBurst,
		"failed checks (400/401) one client address may make at once before they are answered 429 source_rate_limited; passing checks are never limited (0: off)")
	fs.Float64Var(&o.SourceFailureRate, "source-failure-rate", o.SourceFailureRate, "failed checks per second refilled per client address")
	fs.IntVar(&o.SourceFailureAddresses, "source-failure-addresses", o.SourceFailureAddresses, "client addresses whose failures are tracked at once (least recently seen forgotten)")
}

// Validate reports every invalid option, each naming its flag.
func (o *FailureLimitOptions) Validate() error {
	var errs []error
	if o.SourceFailureBurst < 0 {
		errs = append(errs, fmt.Errorf("--source-failure-burst: want >= 0, got %d", o.SourceFailureBurst))
	}
	if o.SourceFailureBurst > 0 && !(o.SourceFailureRate > 0 && o.SourceFailureRate <= 1e6) {
		errs = append(errs, fmt.Errorf("--source-failure-rate: want > 0 and at most 1e6, got %v", o.SourceFailureRate))
	}
	if o.SourceFailureBurst > 0 && o.SourceFailureAddresses < 1 {
		errs = append(errs, fmt.Errorf("--source-failure-addresses: want >= 1, got %d", o.SourceFailureAddresses))
	}
	return errors.Join(errs...)
}

// failureLimiter is one token bucket of failures per client address, each
// starting full; a failure takes a token, and a failure that finds none is
// answered source_rate_limited. Safe for concurrent use; nil limits nothing.
type failureLimiter struct {
	burst float64
	rate  float64 // tokens a second
	max   int
	mu    sync.Mutex
	lru   *list.List // of *failureBucket, most recently seen first
	by    map[string]*list.Element
}

type failureBucket struct {
	addr   string
	tokens float64
	at     time.Time
}

// newFailureLimiter returns nil when the limit is off.
func newFailureLimiter(o FailureLimitOptions) *failureLimiter {
	if o.SourceFailureBurst == 0 {
		return nil
	}
	return &failureLimiter{burst: float64(o.SourceFailureBurst), rate: o.SourceFailureRate,
		max: o.SourceFailureAddresses, lru: list.New(), by: map[string]*list.Element{}}
}

// clientFailure reports whether d refuses what the client itself sent: a
// request or a credential no agent sends (400, 401). Every other answer (an
// allow, a valid token of an identity not allowed, an unavailable review)
// is never limited.
func clientFailure(d Decision) bool {
	s := d.Status()
	return s == http.StatusBadRequest || s == http.StatusUnauthorized
}

// limit returns d, or source_rate_limited with the whole seconds until the
// address has a token again when d is a client failure and client's bucket
// is empty. The original reason stays in the log line's detail.
func (f *failureLimiter) limit(client string, d Decision, now time.Time) Decision {
	if f == nil || !clientFailure(d) {
		return d
	}
	ok, wait := f.take(client, now)
	if ok {
		return d
	}
	return Decision{Reason: contract.ReasonSourceRateLimited, Detail: string(d.Reason), RetryAfter: wait}
}

// take takes a token of addr's bucket, refilled continuously up to burst;
// with none it returns false and the seconds until one is there (>= 1).
func (f *failureLimiter) take(addr string, now time.Time) (bool, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.bucket(addr, now)
	if el := now.Sub(b.at).Seconds(); el > 0 {
		b.tokens = math.Min(f.burst, b.tokens+el*f.rate)
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, max(1, int(math.Ceil((1-b.tokens)/f.rate)))
}

// bucket returns addr's bucket, marked most recently seen, creating a full
// one (and forgetting the least recently seen beyond max) if needed.
func (f *failureLimiter) bucket(addr string, now time.Time) *failureBucket {
	if e, ok := f.by[addr]; ok {
		f.lru.MoveToFront(e)
		return e.Value.(*failureBucket)
	}
	b := &failureBucket{addr: addr, tokens: f.burst, at: now}
	f.by[addr] = f.lru.PushFront(b)
	for f.lru.Len() > f.max {
		last := f.lru.Back()
		delete(f.by, last.Value.(*failureBucket).addr)
		f.lru.Remove(last)
	}
	return b
}

// retryAfter is a deny's Retry-After value: the seconds of a
// source_rate_limited answer, 1 for a retryable one (503), "" otherwise.
func retryAfter(d Decision) string {
	switch {
	case d.RetryAfter > 0:
		return strconv.Itoa(d.RetryAfter)
	case d.Reason.Retryable():
		return "1"
	}
	return ""
}
