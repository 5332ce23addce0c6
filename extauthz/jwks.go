package extauthz

import (
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/sync/singleflight"
	"k8s.io/client-go/rest"
)

// The ServiceAccount issuer discovery documents kube-apiserver serves itself
// (whatever --service-account-jwks-uri advertises to others). Its default
// ClusterRoleBinding system:service-account-issuer-discovery grants both to
// every ServiceAccount, so extauthz needs no RBAC rule of its own for them.
const (
	discoveryPath = "/.well-known/openid-configuration"
	jwksPath      = "/openid/v1/jwks"
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

// keyState is one fetched JWKS. Immutable once published.
type keyState struct {
	byKid   map[string][]jose.JSONWebKey
	all     []jose.JSONWebKey
	prints  map[keyPrint]bool // every key of the set, for cached verifications
	issuers []string
	fetched time.Time
}

// keySet holds the cluster's ServiceAccount token verification keys. Reads
// are lock-free; refreshes are single-flighted: the periodic one every
// interval, and one for a token whose kid is unknown, at most once per
// minRefresh however many such tokens arrive. Safe for concurrent use.
type keySet struct {
	fetch      FetchFunc
	issuers    []string // configured; empty: the discovered issuer
	interval   time.Duration
	minRefresh time.Duration
	now        func() time.Time
	metrics    *metrics
	log        *slog.Logger

	state   atomic.Pointer[keyState]
	group   singleflight.Group
	mu      sync.Mutex
	lastTry time.Time // of the last refresh attempt, under mu
}

// keysFor returns the keys a token with kid may be signed with: the keys
// with that kid, or every key when the token names none. ok is false until
// a first fetch succeeded.
func (s *keySet) keysFor(kid string) (keys []jose.JSONWebKey, st *keyState, ok bool) {
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
func (s *keySet) Loaded() bool { return s.state.Load() != nil }

// refreshUnknown refreshes the key set for a token whose kid is not in it,
// unless a refresh was attempted less than minRefresh ago: a storm of tokens
// with made-up kids costs at most one fetch per minRefresh. It waits for the
// refresh (or ctx) and reports whether one ran.
func (s *keySet) refreshUnknown(ctx context.Context) bool {
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
		return nil, s.refresh(fctx, "unknown_kid")
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
func (s *keySet) Run(ctx context.Context) error {
	backoff := time.Second
	for {
		s.mu.Lock()
		s.lastTry = s.now()
		s.mu.Unlock()
		_, err, _ := s.group.Do("refresh", func() (any, error) {
			fctx, cancel := context.WithTimeout(ctx, fetchTimeout)
			defer cancel()
			return nil, s.refresh(fctx, "periodic")
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

// refresh fetches the documents and publishes the new key set. Errors are
// logged here (they carry no token) and returned.
func (s *keySet) refresh(ctx context.Context, trigger string) error {
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

func (s *keySet) load(ctx context.Context) (*keyState, error) {
	issuers := s.issuers
	if len(issuers) == 0 {
		b, err := s.fetch(ctx, discoveryPath)
		if err != nil {
			return nil, fmt.Errorf("jwks: %w", err)
		}
		iss, err := parseDiscovery(b)
		if err != nil {
			return nil, err
		}
		issuers = []string{iss}
	}
	b, err := s.fetch(ctx, jwksPath)
	if err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	st, err := parseJWKS(b)
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
		return "", fmt.Errorf("jwks: %s: %w", discoveryPath, err)
	}
	if doc.Issuer == "" {
		return "", fmt.Errorf("jwks: %s: no issuer", discoveryPath)
	}
	return doc.Issuer, nil
}

var errNoKeys = errors.New("jwks: no usable signing key")

// parseJWKS keeps the public RSA and ECDSA signature keys of a JWK Set.
// Anything else (private or symmetric keys, encryption keys, other types)
// is skipped: a verification key set never needs it.
func parseJWKS(b []byte) (*keyState, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("jwks: %s: %w", jwksPath, err)
	}
	st := &keyState{byKid: map[string][]jose.JSONWebKey{}, prints: map[keyPrint]bool{}}
	for _, k := range set.Keys {
		if len(st.all) == maxKeys {
			break
		}
		p, ok := printOf(&k)
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

func kids(st *keyState) []string {
	out := make([]string, 0, len(st.all))
	for _, k := range st.all {
		out = append(out, k.KeyID)
	}
	return out
}

func sameKids(a, b *keyState) bool {
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
