//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testagent"
)

// spoofHeaders are client-supplied identity headers in every spelling a
// client can send: canonical, lower and upper case, repeated, the deny
// reason, a name outside the contract, and (underscores) the spellings with
// underscores, which Go proxies accept as distinct names, nginx drops and
// Envoy (headers_with_underscores_action: REJECT_REQUEST) refuses.
func spoofHeaders(victimPeer, victimKey string, underscores bool) http.Header {
	if underscores {
		return http.Header{
			"X_WireKube_Peer":           {victimPeer},
			"X_WIREKUBE_PUBLIC_KEY":     {victimKey},
			"x_wirekube_identity":       {"spoofed"},
			"X_WireKube_Binding":        {"spoofed"},
			"X_WireKube_Client_Address": {"198.51.100.77"},
		}
	}
	return http.Header{
		contract.HeaderPeer:         {victimPeer},
		"x-wirekube-public-key":     {victimKey},
		"X-WIREKUBE-IDENTITY":       {"system:serviceaccount:wirekube-system:spoofed"},
		contract.HeaderTokenExpires: {"2099-01-01T00:00:00Z", "2099-01-02T00:00:00Z"},
		contract.HeaderDenyReason:   {"spoofed"},
		"X-WireKube-Extra":          {"spoofed"},
		contract.HeaderSignature:    {"spoofed"},
		"x-wirekube-binding":        {"v1;spoofed"},
		"X-WIREKUBE-CLIENT-ADDRESS": {"198.51.100.77"},
	}
}

// wireKubeFamily reports whether a header name is in the X-WireKube-*
// family once underscores are read as dashes (what a CGI-style or
// underscore-folding upstream would do).
func wireKubeFamily(name string) bool {
	return contract.IsWireKubeHeader(strings.ReplaceAll(name, "_", "-"))
}

// contractHeader reports whether name is one of the contract's eight
// X-WireKube-* names in any spelling (case, underscores).
func contractHeader(name string) bool {
	n := strings.ReplaceAll(name, "_", "-")
	for _, h := range append([]string{contract.HeaderDenyReason}, contract.IdentityHeaders...) {
		if strings.EqualFold(n, h) {
			return true
		}
	}
	return false
}

// matrixSpoof: the bridge receives each identity header exactly once, with
// the value from the auth answer, and no other X-WireKube-* spelling; the
// auth service receives none of the client's (except where the front cannot
// clear them: ingress-nginx without snippets, where extauthz ignores them).
func (e *env) matrixSpoof(t *testing.T, r *frontRow, a identity) {
	victim := e.matrixAgent(t, r, "victim")
	o := r.opts(a)
	o.Header = spoofHeaders(victim.peer, victim.key.Base64(), false)
	underscored := spoofHeaders(victim.peer, victim.key.Base64(), true)
	if r.rejectsUnderscores {
		ou := o
		ou.Header = underscored
		bm := r.bridgeHop.Mark()
		if got := dialAnswer(t, ou); got.status != http.StatusBadRequest || len(r.bridgeHop.Since(bm)) != 0 {
			t.Errorf("underscore header names: HTTP %d, reached the bridge %v; want 400 before any filter", got.status, len(r.bridgeHop.Since(bm)) > 0)
		}
	} else {
		for k, v := range underscored {
			o.Header[k] = v
		}
	}
	am, bm := r.authHop.Mark(), r.bridgeHop.Mark()
	c, err := testagent.Dial(context.Background(), o, a.key)
	fatalIf(t, err)
	defer c.Close()
	alive(t, c, a.key)
	heads := r.bridgeHop.Since(bm)
	if len(heads) != 1 {
		t.Fatalf("%d requests reached the bridge, want 1", len(heads))
	}
	want := map[string]string{
		http.CanonicalHeaderKey(contract.HeaderPeer):      a.peer,
		http.CanonicalHeaderKey(contract.HeaderPublicKey): a.key.Base64(),
		http.CanonicalHeaderKey(contract.HeaderIdentity):  "system:serviceaccount:" + stack.Namespace + ":" + agentSA,
		// extauthz's: the address the front saw, the test client's loopback.
		http.CanonicalHeaderKey(contract.HeaderClientAddress): "127.0.0.1",
	}
	for name, vs := range heads[0].Header {
		if !wireKubeFamily(name) {
			continue
		}
		switch canon := http.CanonicalHeaderKey(name); {
		case want[canon] != "":
			if len(vs) != 1 || vs[0] != want[canon] {
				t.Errorf("bridge got %s %q, want exactly [%q]", name, vs, want[canon])
			}
		case canon == http.CanonicalHeaderKey(contract.HeaderTokenExpires):
			if len(vs) != 1 || strings.HasPrefix(vs[0], "2099") {
				t.Errorf("bridge got %s %q, want the token's expiry once", name, vs)
			}
		case canon == http.CanonicalHeaderKey(contract.HeaderSignature):
			// extauthz's signature, once: the session above is alive, so it
			// verified; a client's copy would be a second value or "spoofed".
			if len(vs) != 1 || vs[0] == "spoofed" {
				t.Errorf("bridge got %s %q, want extauthz's signature once", name, vs)
			}
		case canon == http.CanonicalHeaderKey(contract.HeaderBinding):
			if b, err := revocation.ParseBinding(strings.Join(vs, ",")); len(vs) != 1 || err != nil || b.Peer != a.peer {
				t.Errorf("bridge got %s %q, want extauthz's binding of %s once", name, vs, a.peer)
			}
		case !contractHeader(name) && !r.stripsFamily:
			// A name outside the contract: this front clears only the
			// contract's names (no wildcard), which the bridge ignores.
		default:
			t.Errorf("bridge got client header %s %q", name, vs)
		}
	}
	if r.grpcAuth {
		return // the gRPC check is not HTTP/1.1; the stand-in strips before it (envoystandin tests)
	}
	for _, h := range r.authHop.Since(am) {
		for name := range h.Header {
			if wireKubeFamily(name) && !r.authSeesClient && (r.stripsFamily || contractHeader(name)) {
				t.Errorf("auth service got client header %s", name)
			}
		}
	}
}

// matrixAuthorization: no Authorization reaches the bridge (ingress-nginx
// without a configuration-snippet cannot remove it: asserted as it is).
func (e *env) matrixAuthorization(t *testing.T, r *frontRow, a identity) {
	bm := r.bridgeHop.Mark()
	c := session(t, r.front, a)
	c.Close()
	heads := r.bridgeHop.Since(bm)
	if len(heads) != 1 {
		t.Fatalf("%d requests reached the bridge, want 1", len(heads))
	}
	got := heads[0].Header.Values("Authorization")
	switch {
	case r.keepsAuthz && len(got) != 1:
		t.Errorf("bridge got Authorization %d times; this front is documented to pass it once", len(got))
	case !r.keepsAuthz && len(got) != 0:
		t.Errorf("bridge got an Authorization header")
	}
}
