package extauthz

import (
	"context"
	"encoding/hex"
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
)

// hubHolding is a stream joined to e's LiveBindings (as the hub joins a
// bridge's) that holds bindings (ids 1, 2, ...), as a bridge's list would.
func hubHolding(t *testing.T, e *env, bindings ...revocation.Binding) *revocationhub.Stream {
	t.Helper()
	st := revocationhub.NewStream()
	if !e.live.Join(st, 1) {
		t.Fatal("stream not joined")
	}
	for i, b := range bindings {
		if added, _ := st.Add(uint64(i+1), b, 100); !added {
			t.Fatal("binding not added")
		}
	}
	return st
}

// TestKeyHeldByOtherBinding: with a live session of a binding on a bridge
// of this extauthz, an upgrade of the same peer and key under another
// binding is refused 403 key_held_by_other_binding; the same binding (the
// reconnect), a probe, and another key are admitted.
func TestKeyHeldByOtherBinding(t *testing.T) {
	probe := func(h map[string]string) { h["sec-websocket-protocol"] = contract.SubprotocolProbe }
	both := func(h map[string]string) {
		h["sec-websocket-protocol"] = contract.SubprotocolProbe + ", " + contract.Subprotocol
	}
	for _, tc := range []struct {
		name   string
		holder revocation.Binding
		token  string
		edit   func(map[string]string)
		want   contract.Reason
	}{
		{"per-peer unbound holds, per-peer Pod-bound refused", peerSABinding(), "peer-pod", nil, contract.ReasonKeyHeldByOtherBinding},
		{"per-peer unbound holds, per-peer Node-bound refused", peerSABinding(), "peer-node", nil, contract.ReasonKeyHeldByOtherBinding},
		{"per-peer unbound holds, same binding admitted", peerSABinding(), "peer-sa", nil, ""},
		{"per-peer Pod-bound holds, unbound refused", peerPodBinding(), "peer-sa", nil, contract.ReasonKeyHeldByOtherBinding},
		{"agent Pod-bound holds, Node-bound agent refused", podBinding(), "agent-node", nil, contract.ReasonKeyHeldByOtherBinding},
		{"agent Pod-bound holds, same Pod admitted", podBinding(), "agent-pod", nil, ""},
		{"agent holds, another peer's key admitted", podBinding(), "peer-pod", nil, ""},
		{"per-peer holds, a probe of another binding admitted", peerSABinding(), "peer-pod", probe, ""},
		{"per-peer holds, probe and relay offered: a session, refused", peerSABinding(), "peer-pod", both, contract.ReasonKeyHeldByOtherBinding},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			hubHolding(t, e, tc.holder)
			toks := e.tokens()
			d := e.authz.Decide(context.Background(), requestFromCheck(relayCheck(toks[tc.token], tc.edit)))
			wantReason(t, d, tc.want)
			if tc.want == "" {
				return
			}
			if d.Status() != 403 || len(d.Headers) != 0 {
				t.Errorf("status %d with %d headers, want 403 and none", d.Status(), len(d.Headers))
			}
			// The log line names the holder, never its key hash.
			if !strings.Contains(d.Detail, "identity "+tc.holder.Identity) || !strings.Contains(d.Detail, "peer "+tc.holder.Peer) ||
				strings.Contains(d.Detail, hex.EncodeToString(tc.holder.KeySHA256[:])) {
				t.Errorf("detail %q does not name the holder %s of %s", d.Detail, tc.holder.Identity, tc.holder.Peer)
			}
		})
	}
}

// TestKeyHolderGoneAdmits: once the bridge removes the holder's binding
// (its session ended), the other binding is admitted.
func TestKeyHolderGoneAdmits(t *testing.T) {
	e := newEnv(t, nil)
	st := hubHolding(t, e, peerSABinding())
	tok := e.tokens()["peer-pod"]
	wantReason(t, e.check(t, tok), contract.ReasonKeyHeldByOtherBinding)
	st.Remove(1)
	wantReason(t, e.check(t, tok), "")
}

// TestHTTPSubprotocolsRead: the HTTP front reads the offered
// subprotocols, so a probe through nginx or Traefik is told from a session.
func TestHTTPSubprotocolsRead(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Original-URI", "/relay")
	r.Header.Add("Sec-WebSocket-Protocol", contract.SubprotocolProbe)
	if req := requestFromHTTP(r); !probeOnly(req.Subprotocols) {
		t.Errorf("subprotocols %q: not read as a probe", req.Subprotocols)
	}
	r.Header.Add("Sec-WebSocket-Protocol", contract.Subprotocol)
	if req := requestFromHTTP(r); probeOnly(req.Subprotocols) {
		t.Errorf("subprotocols %q: read as a probe, offers the relay one too", req.Subprotocols)
	}
}
