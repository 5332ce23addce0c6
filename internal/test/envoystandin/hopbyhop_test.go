package envoystandin

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
)

// TestConnectionNominatedIdentitySurvives: a client that names
// X-WireKube-Peer in its Connection header does not make the identity
// extauthz set disappear on the way to the bridge.
func TestConnectionNominatedIdentitySurvives(t *testing.T) {
	b := &peerBridge{}
	s, _ := newAllowingServer(t, b, Options{})
	for _, conn := range []string{"upgrade, x-wirekube-peer", "X-WireKube-Peer", "keep-alive, x-wirekube-identity, x-wirekube-peer"} {
		r := httptest.NewRequest(http.MethodGet, "https://relay.example.com/relay", nil)
		r.Header.Set("Connection", conn)
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set(contract.HeaderPeer, "spoof")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Errorf("Connection %q: status %d, want the bridge's 200", conn, w.Code)
		}
	}
	if got, want := b.seen(), []string{extauthzPeer, extauthzPeer, extauthzPeer}; !slices.Equal(got, want) {
		t.Errorf("bridge saw X-WireKube-Peer %q, want %q", got, want)
	}
}

// TestStripConnectionNominated: the named headers and Keep-Alive go, the
// upgrade handshake stays.
func TestStripConnectionNominated(t *testing.T) {
	h := http.Header{"Connection": {"upgrade, X-Foo", "keep-alive"}, "Upgrade": {"websocket"}, "X-Foo": {"1"}, "Keep-Alive": {"t=1"}, "X-Bar": {"2"}}
	stripConnectionNominated(h)
	want := http.Header{"Connection": {"upgrade"}, "Upgrade": {"websocket"}, "X-Bar": {"2"}}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("got %v, want %v", h, want)
	}
}
