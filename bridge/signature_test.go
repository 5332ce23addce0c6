package bridge

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/identitysig"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// TestSignatureRefusedBeforeDial: identity headers the bridge cannot
// verify are refused with their reason before the relay is dialled (and so
// before any upgrade), logged at warning level without the signature; a
// valid one gets as far as the relay dial.
func TestSignatureRefusedBeforeDial(t *testing.T) {
	key, other := testutil.SigningKey(1), testutil.SigningKey(2)
	now := time.Now()
	signed := func(mod func(http.Header)) func() http.Header {
		return func() http.Header {
			hdr := identity(testKey(1))
			if mod != nil {
				mod(hdr)
			}
			return testutil.SignHeaders(hdr, key, now)
		}
	}
	after := func(sign func() http.Header, mod func(http.Header)) func() http.Header {
		return func() http.Header { h := sign(); mod(h); return h }
	}
	tests := []struct {
		name    string
		headers func() http.Header
		reason  contract.Reason
	}{
		{"valid reaches the relay dial", signed(nil), contract.ReasonRelayUnavailable},
		{"unsigned", func() http.Header { return identity(testKey(1)) }, contract.ReasonIdentitySignatureMissing},
		{"signed by an unpublished key", func() http.Header { return testutil.SignHeaders(identity(testKey(1)), other, now) }, contract.ReasonIdentitySignatureInvalid},
		{"peer changed after signing", after(signed(nil), func(h http.Header) { h.Set(contract.HeaderPeer, "node-b") }), contract.ReasonIdentitySignatureInvalid},
		{"key changed after signing", after(signed(nil), func(h http.Header) { h.Set(contract.HeaderPublicKey, testKey(2).Base64()) }), contract.ReasonIdentitySignatureInvalid},
		{"identity changed after signing", after(signed(nil), func(h http.Header) {
			h.Set(contract.HeaderIdentity, "system:serviceaccount:wirekube-system:wirekube-relay-peer-node-b")
		}), contract.ReasonIdentitySignatureInvalid},
		{"expiry changed after signing", after(signed(nil), func(h http.Header) { h.Set(contract.HeaderTokenExpires, "2031-01-02T03:04:05Z") }), contract.ReasonIdentitySignatureInvalid},
		{"binding added after signing", after(signed(nil), func(h http.Header) {
			for k, v := range boundAs(testKey(1), "system:serviceaccount:wirekube-system:wirekube-agent", "agent-a") {
				h[k] = v
			}
		}), contract.ReasonIdentitySignatureInvalid},
		{"client address changed after signing", after(signed(withClient("203.0.113.7")), withClient("198.51.100.9")), contract.ReasonIdentitySignatureInvalid},
		{"client address dropped after signing", after(signed(withClient("203.0.113.7")), func(h http.Header) { h.Del(contract.HeaderClientAddress) }), contract.ReasonIdentitySignatureInvalid},
		{"client address added after signing", after(signed(nil), withClient("198.51.100.9")), contract.ReasonIdentitySignatureInvalid},
		{"repeated", after(signed(nil), func(h http.Header) { h.Add(contract.HeaderSignature, h.Get(contract.HeaderSignature)) }), contract.ReasonIdentitySignatureInvalid},
		{"garbage", after(signed(nil), func(h http.Header) { h.Set(contract.HeaderSignature, "v1.secret-token-value") }), contract.ReasonIdentitySignatureInvalid},
		{"stale", func() http.Header { return testutil.SignHeaders(identity(testKey(1)), key, now.Add(-31*time.Second)) }, contract.ReasonIdentitySignatureStale},
		{"from the future", func() http.Header { return testutil.SignHeaders(identity(testKey(1)), key, now.Add(time.Minute)) }, contract.ReasonIdentitySignatureStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dials atomic.Int32
			o := testOptions("127.0.0.1:1")
			o.IdentityKeysFile = testutil.PublishKeys(t, key)
			o.DialRelay = func(context.Context, string, string) (net.Conn, error) {
				dials.Add(1)
				return nil, errors.New("relay down (test)")
			}
			logs := &testutil.SyncBuffer{}
			srv := mustNew(t, o, logs, prometheus.NewRegistry())
			r := upgradeRequest()
			r.Header = tt.headers()
			for k, v := range upgradeRequest().Header {
				if !contract.IsWireKubeHeader(k) {
					r.Header[k] = v
				}
			}
			w := httptest.NewRecorder()
			srv.Handler().ServeHTTP(w, r)
			if w.Code != tt.reason.HTTPStatus() || w.Header().Get(contract.HeaderDenyReason) != string(tt.reason) {
				t.Fatalf("got %d %q, want %d %q", w.Code, w.Header().Get(contract.HeaderDenyReason), tt.reason.HTTPStatus(), tt.reason)
			}
			if got := promtest.ToFloat64(srv.metrics.rejects.WithLabelValues(string(tt.reason))); got != 1 {
				t.Errorf("rejects_total{reason=%q} = %v, want 1", tt.reason, got)
			}
			if tt.reason == contract.ReasonRelayUnavailable {
				if dials.Load() == 0 {
					t.Fatal("a valid signature never reached the relay dial")
				}
				return
			}
			if n := dials.Load(); n != 0 {
				t.Errorf("the relay was dialled %d times for a refused signature", n)
			}
			if !containsAll(logs.String(), `"level":"WARN"`, `"reason":"`+string(tt.reason)+`"`) {
				t.Errorf("log lacks WARN and the reason: %s", logs)
			}
			if sig := r.Header.Get(contract.HeaderSignature); strings.Contains(logs.String(), "secret-token-value") ||
				(sig != "" && strings.Contains(logs.String(), sig)) {
				t.Errorf("log carries the signature header: %s", logs)
			}
		})
	}
}

// withClient sets X-WireKube-Client-Address as extauthz would.
func withClient(addr string) func(http.Header) {
	return func(h http.Header) { h.Set(contract.HeaderClientAddress, addr) }
}

// TestSignedSessionNotReplayable: a signed header set admits one session
// through a real relay; the same set sent again is refused as a replay,
// and a fresh signature of the same identity is admitted.
func TestSignedSessionNotReplayable(t *testing.T) {
	key := testutil.SigningKey(1)
	h := startBridge(t, func(o *Options) { o.IdentityKeysFile = testutil.PublishKeys(t, key) })
	k := testKey(1)
	hdr := testutil.SignHeaders(identity(k), key, time.Now())
	h.registeredAs(t, hdr, k)
	refusedWith(t, h.url, hdr, contract.ReasonIdentitySignatureReplayed)
	h.registeredAs(t, testutil.SignHeaders(identity(k), key, time.Now()), k)
	if got := promtest.ToFloat64(h.srv.metrics.rejects.WithLabelValues(string(contract.ReasonIdentitySignatureReplayed))); got != 1 {
		t.Errorf("replayed rejects = %v, want 1", got)
	}
}

// TestMACSessionAdmittedOnce: a header set authenticated with the in-Pod
// MAC key of the keys file (what a per-start extauthz writes) admits one
// session through a real relay; the same set again is a replay, and one
// under another MAC key is invalid.
func TestMACSessionAdmittedOnce(t *testing.T) {
	mac, other := make([]byte, identitysig.MACKeyLen), make([]byte, identitysig.MACKeyLen)
	other[0] = 1
	path := filepath.Join(t.TempDir(), "identity-keys")
	if err := identitysig.WriteKeys(path, nil, mac); err != nil {
		t.Fatal(err)
	}
	h := startBridge(t, func(o *Options) { o.IdentityKeysFile = path })
	macHeaders := func(key []byte) http.Header {
		hdr := identity(testKey(1))
		hdr.Set(contract.HeaderSignature, identitysig.NewMACSigner(key, nil).Sign(identitysig.Fields{Peer: hdr.Get(contract.HeaderPeer),
			PublicKey: hdr.Get(contract.HeaderPublicKey), Identity: hdr.Get(contract.HeaderIdentity),
			TokenExpires: hdr.Get(contract.HeaderTokenExpires), Binding: hdr.Get(contract.HeaderBinding)}))
		return hdr
	}
	hdr := macHeaders(mac)
	h.registeredAs(t, hdr, testKey(1))
	refusedWith(t, h.url, hdr, contract.ReasonIdentitySignatureReplayed)
	refusedWith(t, h.url, macHeaders(other), contract.ReasonIdentitySignatureInvalid)
}
