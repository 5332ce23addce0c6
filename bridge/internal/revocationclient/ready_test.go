package revocationclient

import (
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestVouchingBound: on the bubble's clock, the bridge vouches from the
// first sync, keeps vouching for exactly --revocation-unready-after after
// the stream is lost, and again from the next sync.
func TestVouchingBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := DefaultOptions()
		o.RevocationAddr = "unix:/nonexistent/revocation.sock"
		o.RevocationUnreadyAfter = 10 * time.Second
		r, err := New(o, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			name string
			do   func()
			want bool
		}{
			{"before the first sync", func() { time.Sleep(time.Hour) }, false},
			{"in sync", r.markSynced, true},
			{"in sync an hour later", func() { time.Sleep(time.Hour) }, true},
			{"just lost", func() { r.endStream(errors.New("gone")) }, true},
			{"lost for the bound minus 1ns", func() { time.Sleep(10*time.Second - time.Nanosecond) }, true},
			{"lost for the bound", func() { time.Sleep(time.Nanosecond) }, false},
			{"in sync again", r.markSynced, true},
			{"lost again, at once", func() { r.endStream(nil) }, true},
		}
		for _, s := range steps {
			s.do()
			if got := r.Vouching(); got != s.want {
				t.Fatalf("%s: vouching = %v, want %v", s.name, got, s.want)
			}
		}
	})
}

// TestVouchingOff: with revocation off (--revocation-addr=) the bridge
// always vouches: nothing gates /readyz or the upgrades.
func TestVouchingOff(t *testing.T) {
	o := DefaultOptions()
	o.RevocationAddr = ""
	o.RevocationSecretFile = "" // not required when off
	r, err := New(o, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if r.Enabled() || !r.Vouching() {
		t.Fatalf("enabled=%v vouching=%v, want off and vouching", r.Enabled(), r.Vouching())
	}
}
