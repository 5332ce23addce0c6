package bridge

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

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
