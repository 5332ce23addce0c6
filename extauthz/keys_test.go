package extauthz

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"github.com/wirekube/relay-ws/extauthz/internal/jwks"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testIssuer is the issuer of the fake API's discovery document.
const testIssuer = "https://kubernetes.default.svc.test"

// signingKey is a ServiceAccount signing key of the fake cluster.
type signingKey struct {
	kid  string
	priv *rsa.PrivateKey
}

// testKeys caches the suite's RSA keys: generating one costs ~100 ms.
var testKeys sync.Map // kid -> *signingKey

func keyFor(kid string) *signingKey {
	if k, ok := testKeys.Load(kid); ok {
		return k.(*signingKey)
	}
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err) // crypto/rand failing ends every test anyway
	}
	k, _ := testKeys.LoadOrStore(kid, &signingKey{kid: kid, priv: priv})
	return k.(*signingKey)
}

// claimsFor are the claims kube-apiserver puts in a token of ServiceAccount
// ns/name (uid), pod-bound when pod is set, for aud, expiring at exp.
type tokenSpec struct {
	key      *signingKey
	kid      *string // nil: key.kid; pointer to "" leaves the header out
	issuer   string
	aud      any // string, []string, or nil for no claim
	exp      time.Time
	nbf, iat time.Time
	ns, sa   string
	saUID    string
	pod      *ref
	node     *ref
	secret   *ref
	subject  string // default system:serviceaccount:ns:sa
}

// ref names a bound object in a token's kubernetes.io claim, as the
// API server writes it.
type ref struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// sign mints the token of s and records it for the suite's log grep.
func (s tokenSpec) sign() string {
	if s.key == nil {
		s.key = keyFor("test")
	}
	kid := s.key.kid
	if s.kid != nil {
		kid = *s.kid
	}
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: s.key.priv}, opts)
	if err != nil {
		panic(err)
	}
	tok, err := jwt.Signed(signer).Claims(s.claims()).Serialize()
	if err != nil {
		panic(err)
	}
	suiteTokens.Store(tok, true)
	return tok
}

// signRaw signs payload as it is, with the suite's key: claims a map
// cannot hold (a repeated or case-variant name).
func signRaw(payload string) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: keyFor("test").priv},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), "test"))
	if err != nil {
		panic(err)
	}
	obj, err := signer.Sign([]byte(payload))
	if err != nil {
		panic(err)
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		panic(err)
	}
	suiteTokens.Store(tok, true)
	return tok
}

// ambiguousPayload is a pod-bound agent token's payload expiring at exp
// with extra appended inside the top-level object.
func ambiguousPayload(exp time.Time, extra string) string {
	return fmt.Sprintf(`{"aud":["wirekube-relay"],"exp":%d,"iss":%q,"kubernetes.io":{"namespace":"wirekube-system",`+
		`"node":{"name":"node-a","uid":%q},"pod":{"name":"agent-a","uid":%q},"serviceaccount":{"name":"wirekube-agent","uid":%q}},`+
		`"sub":"system:serviceaccount:wirekube-system:wirekube-agent"%s}`, exp.Unix(), testIssuer, nodeAUID, podAUID, agentSAUID, extra)
}

func (s tokenSpec) claims() map[string]any {
	if s.issuer == "" {
		s.issuer = testIssuer
	}
	if s.ns == "" {
		s.ns, s.sa, s.saUID = "wirekube-system", "wirekube-agent", agentSAUID
	}
	if s.subject == "" {
		s.subject = saUserPrefix + s.ns + ":" + s.sa
	}
	k8s := map[string]any{"namespace": s.ns, "serviceaccount": ref{s.sa, s.saUID}}
	for name, r := range map[string]*ref{"pod": s.pod, "node": s.node, "secret": s.secret} {
		if r != nil {
			k8s[name] = r
		}
	}
	c := map[string]any{"iss": s.issuer, "sub": s.subject, "kubernetes.io": k8s, "jti": rand.Text()}
	if s.aud != nil {
		c["aud"] = s.aud
	}
	for name, t := range map[string]time.Time{"exp": s.exp, "nbf": s.nbf, "iat": s.iat} {
		if !t.IsZero() {
			c[name] = t.Unix()
		}
	}
	return c
}

// fakeDiscovery serves the issuer discovery documents of the fake cluster:
// a mutable set of public keys, a fetch counter and an injectable error.
type fakeDiscovery struct {
	mu      sync.Mutex
	keys    []*signingKey
	issuer  string
	err     error
	fetches atomic.Int64 // of the JWKS document
}

func newFakeDiscovery(kids ...string) *fakeDiscovery {
	d := &fakeDiscovery{issuer: testIssuer}
	for _, kid := range kids {
		d.keys = append(d.keys, keyFor(kid))
	}
	return d
}

func (d *fakeDiscovery) setKeys(kids ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.keys = nil
	for _, kid := range kids {
		d.keys = append(d.keys, keyFor(kid))
	}
}

func (d *fakeDiscovery) setErr(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
}

func (d *fakeDiscovery) fetch(_ context.Context, path string) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return nil, d.err
	}
	switch path {
	case jwks.DiscoveryPath:
		return json.Marshal(map[string]any{"issuer": d.issuer, "jwks_uri": d.issuer + jwks.JWKSPath})
	case jwks.JWKSPath:
		d.fetches.Add(1)
		var set jose.JSONWebKeySet
		for _, k := range d.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.priv.PublicKey, KeyID: k.kid, Algorithm: "RS256", Use: "sig"})
		}
		return json.Marshal(set)
	}
	return nil, fmt.Errorf("fake discovery: no %s", path)
}
