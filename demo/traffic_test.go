package demo

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/bridge"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/refrelay"
	"github.com/wirekube/relay-ws/internal/test/refrelay/refrelaytest"
	"github.com/wirekube/relay-ws/internal/test/testagent"
	"github.com/wirekube/relay-ws/relayproto"
)

// identityFront stands in for the proxy and extauthz: each token maps to
// one peer key; the real bridge and the reference relay do the rest.
type identityFront struct {
	next http.Handler
	keys map[string]relayproto.Key // token -> key
}

func (f identityFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, ok := f.keys[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	if !ok {
		w.Header().Set(contract.HeaderDenyReason, string(contract.ReasonTokenMissing))
		http.Error(w, "denied", http.StatusUnauthorized)
		return
	}
	r.Header.Set(contract.HeaderPeer, "node-x")
	r.Header.Set(contract.HeaderPublicKey, key.Base64())
	r.Header.Set(contract.HeaderIdentity, "system:serviceaccount:wirekube-system:wirekube-agent")
	r.Header.Set(contract.HeaderTokenExpires, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	f.next.ServeHTTP(w, r)
}

// pair connects two agents through the real bridge and reference relay.
func pair(t *testing.T) (a, b *testagent.Conn, ka, kb relayproto.Key) {
	t.Helper()
	ka, kb = relayproto.Key{1, 2, 3}, relayproto.Key{4, 5, 6}
	_, relayAddr := refrelaytest.Start(t, refrelay.Options{DisableUDP: true})
	o := bridge.DefaultOptions()
	o.RelayAddr, o.MetricsListen, o.DrainTimeout = relayAddr, "", time.Second
	o.RevocationAddr = ""   // no extauthz here: identityFront sets no binding
	o.IdentityKeysFile = "" // nor a signature: no extauthz signs for identityFront
	cfg, err := o.Complete()
	if err != nil {
		t.Fatal(err)
	}
	br, err := bridge.New(cfg, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(identityFront{next: br.Handler(), keys: map[string]relayproto.Key{"ta": ka, "tb": kb}})
	t.Cleanup(func() { br.Drain(); srv.Close() })
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/relay"
	dial := func(tok string, k relayproto.Key) *testagent.Conn {
		c, err := testagent.Dial(context.Background(), testagent.Options{URL: url, Token: tok, KeepaliveInterval: -1}, k)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := echo(c, k); err != nil {
			t.Fatal(err)
		}
		return c
	}
	return dial("ta", ka), dial("tb", kb), ka, kb
}

// TestStreamThroughBridgeAndRelay: the windowed stream loses nothing even
// though the relay drops frames beyond 256 queued per destination.
func TestStreamThroughBridgeAndRelay(t *testing.T) {
	a, b, ka, kb := pair(t)
	tr, err := stream(context.Background(), a, b, ka, kb, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if tr.FramesAB < 3 || tr.FramesBA < 3 || tr.BytesAB == 0 || tr.BytesBA == 0 || tr.MBps() <= 0 {
		t.Fatalf("too little traffic: %+v", tr)
	}
	rtts, err := roundTrips(a, b, ka, kb, 20)
	if err != nil {
		t.Fatal(err)
	}
	rttStats(&tr, rtts)
	if tr.RTTs != 20 || tr.RTTP50 <= 0 || tr.RTTP99 < tr.RTTP50 {
		t.Fatalf("round trips: %+v", tr)
	}
}

// TestStreamDetectsWrongSource: frames arriving from another key than the
// stream's sender fail the receive check instead of being counted.
func TestStreamDetectsWrongSource(t *testing.T) {
	a, b, ka, kb := pair(t)
	// b's receiver expects a's key; a third party (b itself, to itself)
	// injects a frame first.
	if err := b.SendData(kb, []byte("intruder")); err != nil {
		t.Fatal(err)
	}
	f := &flow{from: a, to: b, fromKey: ka, toKey: kb, pattern: make([]byte, 4*maxPayload), credits: make(chan struct{}, window)}
	f.receive()
	if f.receiveErr == nil || !strings.Contains(f.receiveErr.Error(), "frame 0 from") {
		t.Fatalf("receive error %v, want a wrong-source error", f.receiveErr)
	}
}

func TestPayloadIsReproducible(t *testing.T) {
	pattern := make([]byte, 4*maxPayload)
	for i := range pattern {
		pattern[i] = byte(i * 7)
	}
	for seq := range uint64(7) {
		p1, p2 := payload(nil, seq, pattern), payload(nil, seq, pattern)
		if string(p1) != string(p2) || len(p1) != payloadSize(seq) {
			t.Fatalf("seq %d: len %d, want %d, reproducible %v", seq, len(p1), payloadSize(seq), string(p1) == string(p2))
		}
		if len(p1) > maxPayload {
			t.Fatalf("seq %d: %d bytes exceed the largest Data payload %d", seq, len(p1), maxPayload)
		}
	}
	if string(payload(nil, 0, pattern)[8:]) == string(payload(nil, 3, pattern)[8:]) {
		t.Error("seq 0 and 3 carry the same bytes: a reordering would go unnoticed")
	}
}

func TestPercentile(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var d []time.Duration
		for _, v := range n {
			d = append(d, time.Duration(v)*time.Millisecond)
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 0.50, 50 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p99 of 3", ms(1, 2, 3), 0.99, 3 * time.Millisecond},
		{"p50 of 4", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile = %s, want %s", got, tt.want)
			}
		})
	}
}
