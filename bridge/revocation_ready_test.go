package bridge

import (
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

// TestVouchingBound: on the bubble's clock, the bridge vouches from the
// first sync, keeps vouching for exactly --revocation-unready-after after
// the stream is lost, and again from the next sync.
func TestVouchingBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := testOptions("192.0.2.1:3478")
		o.RevocationAddr = "unix:/nonexistent/revocation.sock"
		o.RevocationUnreadyAfter = 10 * time.Second
		cfg, err := o.Complete()
		must(t, err)
		m, err := newRevocationMetrics(prometheus.NewRegistry())
		must(t, err)
		r := newRevoker(cfg, slog.New(slog.DiscardHandler), m)
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
			if got := r.vouching(); got != s.want {
				t.Fatalf("%s: vouching = %v, want %v", s.name, got, s.want)
			}
		}
	})
}

// TestVouchingOff: with revocation off (--revocation-addr=) the bridge
// always vouches: nothing gates /readyz or the upgrades.
func TestVouchingOff(t *testing.T) {
	o := testOptions("192.0.2.1:3478")
	o.RevocationAddr = ""
	o.RevocationSecretFile = "" // not required when off
	cfg, err := o.Complete()
	must(t, err)
	m, err := newRevocationMetrics(prometheus.NewRegistry())
	must(t, err)
	if r := newRevoker(cfg, slog.New(slog.DiscardHandler), m); r.enabled() || !r.vouching() {
		t.Fatalf("enabled=%v vouching=%v, want off and vouching", r.enabled(), r.vouching())
	}
}

func readyzOf(t *testing.T, h *harness) int {
	t.Helper()
	resp, err := http.Get(h.admin + "/readyz")
	must(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// denyOf dials and returns the deny status and reason.
func denyOf(t *testing.T, h *harness) (int, string) {
	t.Helper()
	hdr := boundIdentity("node-a", testKey(1))
	hdr.Set("Sec-WebSocket-Protocol", contract.Subprotocol)
	ws, resp, err := (&websocket.Dialer{}).Dial(h.url, hdr)
	if err == nil {
		ws.Close()
		return http.StatusSwitchingProtocols, ""
	}
	if resp == nil {
		t.Fatalf("dial: %v", err)
	}
	return resp.StatusCode, resp.Header.Get(contract.HeaderDenyReason)
}

// TestUnreadyWithoutStream, in the order of events: a bridge whose
// extauthz never answered is not ready and refuses upgrades with 503
// revocation_unavailable; once in sync it is ready and admits; once its
// extauthz is gone for --revocation-unready-after it is not ready and
// refuses again, before the stale timeout closes what it admitted.
func TestUnreadyWithoutStream(t *testing.T) {
	f, stop := startFakeWatch(t)
	never := startBridge(t, func(o *Options) {
		f.use(o)
		o.RevocationAddr = "unix:" + filepath.Join(t.TempDir(), "absent.sock")
	})
	if got := readyzOf(t, never); got != http.StatusServiceUnavailable {
		t.Fatalf("never synced: /readyz %d, want 503", got)
	}
	if st, r := denyOf(t, never); st != http.StatusServiceUnavailable || r != string(contract.ReasonRevocationUnavailable) {
		t.Fatalf("never synced: %d %s, want 503 revocation_unavailable", st, r)
	}

	h := startBridge(t, func(o *Options) {
		f.use(o)
		o.RevocationUnreadyAfter = 200 * time.Millisecond
		o.RevocationStaleTimeout = time.Minute
	})
	h.waitVouching(t)
	if got := readyzOf(t, h); got != http.StatusOK {
		t.Fatalf("in sync: /readyz %d, want 200", got)
	}
	ws := h.registerAs(t, boundIdentity("node-b", testKey(2)), testKey(2))
	waitHeld(t, f, 1)
	stop()
	testutil.Eventually(t, "/readyz 503 after the stream is lost", func() bool { return readyzOf(t, h) == http.StatusServiceUnavailable })
	if st, r := denyOf(t, h); st != http.StatusServiceUnavailable || r != string(contract.ReasonRevocationUnavailable) {
		t.Fatalf("out of sync: %d %s, want 503 revocation_unavailable", st, r)
	}
	send(t, ws, dataFrame(testKey(2), 1, 16)) // the admitted session still runs
	fs := &frameStream{t: t, ws: ws}
	if fr := fs.next(); fr.Type != relayproto.TypeData {
		t.Fatalf("admitted session after the loss: frame %v", fr.Type)
	}
}
