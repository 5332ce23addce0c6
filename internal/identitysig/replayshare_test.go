package identitysig

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// TestReplayCacheShare: an owner holding its share is refused with
// ErrShareFull while other owners still spend, a full cache is
// ErrCacheFull, and an owner's share comes back as its nonces expire.
func TestReplayCacheShare(t *testing.T) {
	c := NewSharedReplayCache(5, 2)
	n := func(b byte) (x [NonceLen]byte) { x[0] = b; return x }
	steps := []struct {
		owner string
		nonce byte
		until time.Duration
		at    time.Duration
		want  error
	}{
		{"node-a", 1, 10 * time.Second, 0, nil},
		{"node-a", 2, 10 * time.Second, 0, nil},
		{"node-a", 3, 10 * time.Second, 0, ErrShareFull},
		{"node-a", 1, 10 * time.Second, 0, ErrReplayed}, // a replay is a replay, share or not
		{"node-b", 4, 20 * time.Second, 0, nil},
		{"node-b", 5, 20 * time.Second, 0, nil},
		{"node-c", 6, 20 * time.Second, 0, nil},
		{"node-d", 7, 20 * time.Second, 0, ErrCacheFull}, // 5 held
		{"node-a", 3, 20 * time.Second, 10*time.Second + 1, nil},
		{"node-a", 8, 20 * time.Second, 10*time.Second + 1, nil},
		{"node-a", 9, 20 * time.Second, 10*time.Second + 1, ErrShareFull},
	}
	for i, st := range steps {
		err := c.Spend(n(st.nonce), st.owner, t0.Add(st.until), t0.Add(st.at))
		if !errors.Is(err, st.want) || (st.want == nil && err != nil) {
			t.Fatalf("step %d: Spend(%s, %d) = %v, want %v", i, st.owner, st.nonce, err, st.want)
		}
	}
	at := t0.Add(10*time.Second + 1)
	for owner, want := range map[string]int{"node-a": 2, "node-b": 2, "node-c": 1, "node-d": 0} {
		if got := c.Held(owner, at); got != want {
			t.Errorf("Held(%s) = %d, want %d", owner, got, want)
		}
	}
}

// TestSpendOnceUnderRace: of many concurrent Spends of one nonce exactly
// one succeeds; the others are replays.
func TestSpendOnceUnderRace(t *testing.T) {
	c := NewSharedReplayCache(64, 64)
	var nonce [NonceLen]byte
	nonce[3] = 7
	const racers = 16
	errs := make(chan error, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range racers {
		wg.Go(func() {
			<-start
			errs <- c.Spend(nonce, "node-a", t0.Add(time.Minute), t0)
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	won, replayed := 0, 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, ErrReplayed):
			replayed++
		default:
			t.Errorf("Spend = %v, want nil or ErrReplayed", err)
		}
	}
	if won != 1 || replayed != racers-1 {
		t.Fatalf("%d won, %d replayed; want 1 and %d", won, replayed, racers-1)
	}
}

// TestCheckSpendsNothing: Check accepts a signature as often as it is
// asked until Spend records its nonce; then Check and Spend both call it
// a replay.
func TestCheckSpendsNothing(t *testing.T) {
	key := fixedKey(1)
	now := t0
	v := newVerifier(&now, key)
	value := NewSigner(key, func() time.Time { return t0 }).Sign(sampleFields())
	var ok Verified
	for i := range 3 {
		var reason contract.Reason
		var err error
		if ok, reason, err = v.Check([]string{value}, sampleFields()); reason != "" {
			t.Fatalf("check %d: %q (%v), want accepted", i, reason, err)
		}
	}
	if n := v.Replay.Len(); n != 0 {
		t.Fatalf("after three checks the cache holds %d nonces, want 0", n)
	}
	if reason, err := v.Spend(ok, "node-a"); reason != "" {
		t.Fatalf("first spend: %q (%v)", reason, err)
	}
	if reason, _ := v.Spend(ok, "node-a"); reason != contract.ReasonIdentitySignatureReplayed {
		t.Fatalf("second spend: %q, want %q", reason, contract.ReasonIdentitySignatureReplayed)
	}
	if _, reason, _ := v.Check([]string{value}, sampleFields()); reason != contract.ReasonIdentitySignatureReplayed {
		t.Fatalf("check after the spend: %q, want %q", reason, contract.ReasonIdentitySignatureReplayed)
	}
}

// TestSpendAtShare: a peer at its share is refused with its own reason.
func TestSpendAtShare(t *testing.T) {
	key := fixedKey(1)
	now := t0
	v := &Verifier{Keys: keysOf(key), MaxAge: 30 * time.Second, Replay: NewSharedReplayCache(8, 1),
		Now: func() time.Time { return now }}
	s := NewSigner(key, func() time.Time { return t0 })
	for i, want := range []contract.Reason{"", contract.ReasonIdentityReplayPeerShare} {
		if got, err := v.Verify([]string{s.Sign(sampleFields())}, sampleFields()); got != want {
			t.Fatalf("upgrade %d: %q (%v), want %q", i, got, err, want)
		}
	}
}
