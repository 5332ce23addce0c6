// Package jwks holds the cluster's ServiceAccount token verification keys:
// the JWKS extauthz fetches from the API server, refreshed periodically and
// for a token whose kid is unknown, and a key's print for cached
// verifications.
package jwks

import (
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"
	"k8s.io/client-go/rest"
)

// The ServiceAccount issuer discovery documents kube-apiserver serves itself
// (whatever --service-account-jwks-uri advertises to others). Its default
// ClusterRoleBinding system:service-account-issuer-discovery grants both to
// every ServiceAccount, so extauthz needs no RBAC rule of its own for them.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/openid/v1/jwks"
)

// maxKeys bounds the keys kept from one JWKS: a token without kid is tried
// against each, so the bound is also the worst-case verifications per check.
const maxKeys = 16

// FetchFunc GETs an absolute path from the API server and returns the body.
type FetchFunc func(ctx context.Context, path string) ([]byte, error)

// RESTFetch is the FetchFunc of a client-go REST client: the API server URL
// and credentials of --kubeconfig or the in-cluster config.
func RESTFetch(c rest.Interface) FetchFunc {
	return func(ctx context.Context, path string) ([]byte, error) {
		b, err := c.Get().AbsPath(path).DoRaw(ctx)
		if err != nil {
			// The body may be long; the status error says enough.
			return nil, fmt.Errorf("get %s: %w", path, err)
		}
		return b, nil
	}
}

// State is one fetched JWKS. Immutable once published.
type State struct {
	byKid   map[string][]jose.JSONWebKey
	all     []jose.JSONWebKey
	prints  map[Print]bool // every key of the set, for cached verifications
	issuers []string
	fetched time.Time
}

// Holds reports whether st still has the key of p and the issuer iss.
func (st *State) Holds(p Print, iss string) bool {
	return st.prints[p] && slices.Contains(st.issuers, iss)
}

// Issuers are the issuers a token verified against st may name.
func (st *State) Issuers() []string { return st.issuers }

// Len is the number of keys st keeps.
func (st *State) Len() int { return len(st.all) }

// Set holds the cluster's ServiceAccount token verification keys. Reads
// are lock-free; refreshes are single-flighted: the periodic one every
// interval, and one for a token whose kid is unknown, at most once per
// minRefresh however many such tokens arrive. Safe for concurrent use.
type Set struct {
	fetch      FetchFunc
	issuers    []string // configured; empty: the discovered issuer
	interval   time.Duration
	minRefresh time.Duration
	now        func() time.Time
	metrics    *metrics
	log        *slog.Logger

	state   atomic.Pointer[State]
	group   singleflight.Group
	mu      sync.Mutex
	lastTry time.Time // of the last refresh attempt, under mu
}

// Config is what a Set is built from.
type Config struct {
	Fetch      FetchFunc
	Issuers    []string // configured (--service-account-issuer); empty: the discovered issuer
	Interval   time.Duration
	MinRefresh time.Duration
	Now        func() time.Time
	Log        *slog.Logger
	Reg        prometheus.Registerer // jwks_refreshes_total, jwks_keys
}

// New returns an empty Set (Loaded false until Run or Refresh fetched one).
func New(c Config) (*Set, error) {
	m, err := newMetrics(c.Reg)
	if err != nil {
		return nil, err
	}
	return &Set{fetch: c.Fetch, issuers: c.Issuers, interval: c.Interval, minRefresh: c.MinRefresh,
		now: c.Now, metrics: m, log: c.Log}, nil
}

// Current is the key set published last; nil before the first fetch.
func (s *Set) Current() *State { return s.state.Load() }

// KeysFor returns the keys a token with kid may be signed with: the keys
// with that kid, or every key when the token names none. ok is false until
// a first fetch succeeded.
func (s *Set) KeysFor(kid string) (keys []jose.JSONWebKey, st *State, ok bool) {
	st = s.state.Load()
	if st == nil {
		return nil, nil, false
	}
	if kid == "" {
		return st.all, st, true
	}
	return st.byKid[kid], st, true
}

// Loaded reports whether a JWKS was fetched.
func (s *Set) Loaded() bool { return s.state.Load() != nil }

// RefreshUnknown refreshes the key set for a token whose kid is not in it,
// unless a refresh was attempted less than minRefresh ago: a storm of tokens
// with made-up kids costs at most one fetch per minRefresh. It waits for the
// refresh (or ctx) and reports whether one ran.
func (s *Set) RefreshUnknown(ctx context.Context) bool {
	s.mu.Lock()
	now := s.now()
	if !s.lastTry.IsZero() && now.Sub(s.lastTry) < s.minRefresh {
		s.mu.Unlock()
		return false
	}
	s.lastTry = now
	s.mu.Unlock()
	ch := s.group.DoChan("refresh", func() (any, error) {
		// The shared fetch must not die with the first caller's context.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
		defer cancel()
		return nil, s.Refresh(fctx, "unknown_kid")
	})
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// fetchTimeout bounds one refresh (both documents).
const fetchTimeout = 10 * time.Second

// Run loads the key set, retrying with backoff until it succeeds, then
// refreshes it every interval until ctx is done. A failed refresh keeps the
// last keys: they stay valid until a refresh replaces them.
func (s *Set) Run(ctx context.Context) error {
	backoff := time.Second
	for {
		s.mu.Lock()
		s.lastTry = s.now()
		s.mu.Unlock()
		_, err, _ := s.group.Do("refresh", func() (any, error) {
			fctx, cancel := context.WithTimeout(ctx, fetchTimeout)
			defer cancel()
			return nil, s.Refresh(fctx, "periodic")
		})
		wait := s.interval
		if err != nil && !s.Loaded() {
			wait, backoff = backoff, min(2*backoff, 30*time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Refresh fetches the documents and publishes the new key set. Errors are
// logged here (they carry no token) and returned.
func (s *Set) Refresh(ctx context.Context, trigger string) error {
	st, err := s.load(ctx)
	if err != nil {
		s.metrics.jwksRefreshes.WithLabelValues(trigger, "error").Inc()
		s.log.Warn("jwks refresh failed", "trigger", trigger, "err", err, "have_keys", s.Loaded())
		return err
	}
	prev := s.state.Swap(st)
	s.metrics.jwksRefreshes.WithLabelValues(trigger, "ok").Inc()
	s.metrics.jwksKeys.Set(float64(len(st.all)))
	if prev == nil || !sameKids(prev, st) {
		s.log.Info("jwks loaded", "trigger", trigger, "keys", len(st.all), "kids", kids(st), "issuers", st.issuers)
	}
	return nil
}

func (s *Set) load(ctx context.Context) (*State, error) {
	issuers := s.issuers
	if len(issuers) == 0 {
		b, err := s.fetch(ctx, DiscoveryPath)
		if err != nil {
			return nil, fmt.Errorf("jwks: %w", err)
		}
		iss, err := parseDiscovery(b)
		if err != nil {
			return nil, err
		}
		issuers = []string{iss}
	}
	b, err := s.fetch(ctx, JWKSPath)
	if err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	st, err := ParseJWKS(b)
	if err != nil {
		return nil, err
	}
	st.issuers, st.fetched = issuers, s.now()
	return st, nil
}

// parseDiscovery returns the issuer of an OpenID provider configuration.
func parseDiscovery(b []byte) (string, error) {
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", fmt.Errorf("jwks: %s: %w", DiscoveryPath, err)
	}
	if doc.Issuer == "" {
		return "", fmt.Errorf("jwks: %s: no issuer", DiscoveryPath)
	}
	return doc.Issuer, nil
}

var errNoKeys = errors.New("jwks: no usable signing key")

// ParseJWKS keeps the public RSA and ECDSA signature keys of a JWK Set.
// Anything else (private or symmetric keys, encryption keys, other types)
// is skipped: a verification key set never needs it.
func ParseJWKS(b []byte) (*State, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("jwks: %s: %w", JWKSPath, err)
	}
	st := &State{byKid: map[string][]jose.JSONWebKey{}, prints: map[Print]bool{}}
	for _, k := range set.Keys {
		if len(st.all) == maxKeys {
			break
		}
		p, ok := PrintOf(&k)
		if !ok || !usableKey(&k) {
			continue
		}
		st.prints[p] = true
		st.all = append(st.all, k)
		st.byKid[k.KeyID] = append(st.byKid[k.KeyID], k)
	}
	if len(st.all) == 0 {
		return nil, errNoKeys
	}
	return st, nil
}

func usableKey(k *jose.JSONWebKey) bool {
	if k.Use != "" && k.Use != "sig" {
		return false
	}
	switch k.Key.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey:
		return k.Valid()
	}
	return false
}

func kids(st *State) []string {
	out := make([]string, 0, len(st.all))
	for _, k := range st.all {
		out = append(out, k.KeyID)
	}
	return out
}

func sameKids(a, b *State) bool {
	if len(a.all) != len(b.all) || len(a.issuers) != len(b.issuers) {
		return false
	}
	for kid, ks := range a.byKid {
		if len(b.byKid[kid]) != len(ks) {
			return false
		}
	}
	for i := range a.issuers {
		if a.issuers[i] != b.issuers[i] {
			return false
		}
	}
	return true
}
