//go:build e2e

package e2e

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/identitysig"
	"github.com/wirekube/relay-ws/internal/test/testagent"
)

// testForgedToBridge: whoever reaches the bridge's own address
// (node-local traffic, the API server's Pod proxy, a cluster without
// NetworkPolicy) can send identity headers. A complete set, binding
// included, copied from a real extauthz answer, is refused without
// extauthz's signature, with a signature of another key, and the second
// time the same signed answer is used.
func (e *env) testForgedToBridge(t *testing.T) {
	id := e.podAgent(t, "s13-forger")
	answer := e.extauthzAllow(t, id.token)
	bridge := testagent.Options{URL: "ws://" + e.stack.BridgeAddr + contract.DefaultRelayPath}
	with := func(h http.Header) testagent.Options { o := bridge; o.Header = h; return o }

	t.Run("complete_set_unsigned", func(t *testing.T) {
		h := answer.Clone()
		h.Del(contract.HeaderSignature)
		wantRefused(t, with(h), http.StatusForbidden, contract.ReasonIdentitySignatureMissing)
	})
	t.Run("signed_with_another_key", func(t *testing.T) {
		_, own, err := ed25519.GenerateKey(nil)
		fatalIf(t, err)
		h := answer.Clone()
		h.Set(contract.HeaderSignature, identitysig.NewSigner(own, nil).Sign(fieldsOf(h)))
		wantRefused(t, with(h), http.StatusForbidden, contract.ReasonIdentitySignatureInvalid)
	})
	t.Run("in_pod_mac_of_another_key", func(t *testing.T) {
		// The stack's extauthz has a per-start key: its answers carry the
		// in-Pod form, HMAC-SHA256 under the key of the shared directory.
		if v := answer.Get(contract.HeaderSignature); !strings.HasPrefix(v, identitysig.MACVersion+".") {
			t.Fatalf("extauthz's answer carries %.3s..., want the in-Pod form %s", v, identitysig.MACVersion)
		}
		h := answer.Clone()
		h.Set(contract.HeaderSignature, identitysig.NewMACSigner(identitysig.NewMACKey(), nil).Sign(fieldsOf(h)))
		wantRefused(t, with(h), http.StatusForbidden, contract.ReasonIdentitySignatureInvalid)
	})
	t.Run("signed_answer_for_another_peer", func(t *testing.T) {
		// The whole set moved to another peer, binding included (else the
		// bridge refuses the mismatch before the signature): only the
		// signature still names the first peer.
		h := answer.Clone()
		h.Set(contract.HeaderPeer, "s13-victim")
		h.Set(contract.HeaderBinding, strings.Replace(h.Get(contract.HeaderBinding), ";peer="+id.peer+";", ";peer=s13-victim;", 1))
		wantRefused(t, with(h), http.StatusForbidden, contract.ReasonIdentitySignatureInvalid)
	})
	t.Run("signed_answer_replayed", func(t *testing.T) {
		h := e.extauthzAllow(t, id.token)
		c, err := testagent.Dial(context.Background(), with(h), id.key)
		fatalIf(t, err) // a fresh signed answer is good once, within its max age
		c.Close()
		wantRefused(t, with(h), http.StatusForbidden, contract.ReasonIdentitySignatureReplayed)
	})
}

// extauthzAllow asks extauthz's HTTP front for an upgrade of /relay with
// token, as nginx's auth_request would, and returns the identity headers of
// its allow answer.
func (e *env) extauthzAllow(t *testing.T, token string) http.Header {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(e.relayAuthRequest(t, token).WithContext(ctx))
	fatalIf(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("extauthz answered %d %s, want an allow", resp.StatusCode, resp.Header.Get(contract.HeaderDenyReason))
	}
	h := http.Header{}
	for _, name := range contract.IdentityHeaders {
		if v := resp.Header.Values(name); len(v) > 0 {
			h[http.CanonicalHeaderKey(name)] = v
		}
	}
	if h.Get(contract.HeaderSignature) == "" || h.Get(contract.HeaderBinding) == "" {
		t.Fatalf("extauthz's allow lacks the signature or the binding: %v", h)
	}
	return h
}

func fieldsOf(h http.Header) identitysig.Fields {
	return identitysig.Fields{Peer: h.Get(contract.HeaderPeer), PublicKey: h.Get(contract.HeaderPublicKey),
		Identity: h.Get(contract.HeaderIdentity), TokenExpires: h.Get(contract.HeaderTokenExpires),
		Binding: h.Get(contract.HeaderBinding)}
}
