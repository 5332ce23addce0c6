package revocationclient

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wirekube/relay-ws/internal/revocation"
)

// TestRevokeClosesOnlyTheLiveSessionItNames: a revocation for an id no
// live session has closes nothing; one for a live session closes exactly
// that session, once, with extauthz's reason, and counts one revoked close;
// once the session is removed its id closes nothing again.
func TestRevokeClosesOnlyTheLiveSessionItNames(t *testing.T) {
	o := DefaultOptions()
	o.RevocationAddr = "unix:/nonexistent/revocation.sock"
	r, err := New(o, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour) // no token expiry during the test
	a, b := &fakeSession{expires: later}, &fakeSession{expires: later}
	wa, wb := r.Add(a), r.Add(b)
	defer r.Remove(wa)
	unknown := max(wa.id, wb.id) + 1

	r.revoke(revocation.Op{Kind: revocation.KindRevoke, ID: unknown, Reason: "pod_not_found"})
	if len(a.closed())+len(b.closed()) != 0 {
		t.Fatalf("a revocation of an unknown id closed %v and %v, want nothing", a.closed(), b.closed())
	}
	r.revoke(revocation.Op{Kind: revocation.KindRevoke, ID: wb.id, Reason: "pod_not_found"})
	r.Remove(wb)
	r.revoke(revocation.Op{Kind: revocation.KindRevoke, ID: wb.id, Reason: "node_mismatch"})
	if got := b.closed(); !slices.Equal(got, []string{"revoked pod_not_found"}) {
		t.Errorf("the revoked session closed %q, want once: revoked pod_not_found", got)
	}
	if got := a.closed(); len(got) != 0 {
		t.Errorf("the other session closed %q, want nothing", got)
	}
	if got := promtest.ToFloat64(r.AuthCloses(CauseRevoked)); got != 1 {
		t.Errorf("authorization_closes_total{cause=revoked} = %v, want 1", got)
	}
}
