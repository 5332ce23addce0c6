package sessionlist

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// testSession is a listed session: its seq, peer and start.
type testSession struct {
	seq   uint64
	peer  string
	start time.Time
}

func (s *testSession) Seq() uint64  { return s.seq }
func (s *testSession) Peer() string { return s.peer }
func (s *testSession) Info() contract.SessionInfo {
	return contract.SessionInfo{ID: strconv.FormatUint(s.seq, 10), Peer: s.peer, Since: s.start.UTC().Format(time.RFC3339)}
}

// testDeny writes a refusal as the bridge does: the reason's status, its
// header and Retry-After: 1.
func testDeny(w http.ResponseWriter, reason contract.Reason) {
	w.Header().Set(contract.HeaderDenyReason, string(reason))
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(reason.HTTPStatus())
}

// BenchmarkSessionSnapshot measures the listing's copy of the index
// (snapshot, under no lock of the server) and the whole page (page) with
// 20,000 live sessions, the default --max-sessions.
func BenchmarkSessionSnapshot(b *testing.B) {
	l := New(10*time.Second, testDeny)
	for i := range 20000 {
		l.Add(&testSession{seq: uint64(i + 1), peer: fmt.Sprintf("node-%d", i), start: time.Now()})
	}
	q := listQuery{limit: contract.SessionsLimitDefault}
	b.Run("snapshot", func(b *testing.B) {
		for b.Loop() {
			l.snapshot()
		}
	})
	b.Run("page_of_100", func(b *testing.B) {
		for b.Loop() {
			l.page(q)
		}
	})
	b.Run("page_of_peer", func(b *testing.B) {
		q := listQuery{limit: contract.SessionsLimitDefault, peer: "node-7"}
		for b.Loop() {
			l.page(q)
		}
	})
}
