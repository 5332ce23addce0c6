package datapath

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/relayproto"
)

// TestAddedRoundTripRow: the chain's round trip added to direct TCP's is
// compared with what WireKube's gateway adds in the same run, against the
// row's own ceiling, and an absent path reads "not measured".
func TestAddedRoundTripRow(t *testing.T) {
	r := &Result{Paths: map[string]*Figures{
		pDirect:   {P50: 30 * time.Microsecond},
		pChain:    {P50: 140 * time.Microsecond},
		pWireKube: {P50: 120 * time.Microsecond},
	}}
	got := r.addedRow("added", pChain, pWireKube, 1.2)
	if got.Value != "+110us" || got.Baseline != "WireKube +90us" || got.Ratio != "1.22" || got.Goal != "<= 1.2x" || got.Met != "NO" {
		t.Errorf("row %+v, want +110us against WireKube +90us, ratio 1.22 over the goal <= 1.2x, not met", got)
	}
	r.Paths[pChain].P50 = 130 * time.Microsecond
	if got := r.addedRow("added", pChain, pWireKube, 1.2); got.Ratio != "1.11" || got.Met != "yes" {
		t.Errorf("row %+v, want ratio 1.11 under the goal <= 1.2x, met", got)
	}
	delete(r.Paths, pWireKube)
	if got := r.addedRow("added", pChain, pWireKube, 1.2); got.Met != "not measured" {
		t.Errorf("row without the WireKube path %+v, want not measured", got)
	}
}

// TestForwarderCarriesBothWays: the floor path is a working path: two
// peers registered through it exchange a Data frame each way.
func TestForwarderCarriesBothWays(t *testing.T) {
	relay, relayAddr := startRelay(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- forwarder{relayAddr: relayAddr}.serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	ka, kb := benchKey(1, 1), benchKey(1, 2)
	a, err := dialTCP(ctx, ln.Addr().String(), ka)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	b, err := dialTCP(ctx, ln.Addr().String(), kb)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	for _, k := range []relayproto.Key{ka, kb} {
		if err := relay.WaitRegistered(wctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pingPong(a, b, ka, kb, 3, 0, 64); err != nil {
		t.Fatalf("ping-pong through the forwarder: %v", err)
	}
}
