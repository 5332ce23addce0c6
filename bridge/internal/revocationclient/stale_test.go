package revocationclient

import (
	"slices"
	"testing"
	"time"
)

// TestStaleSweepAfterTheTimeout: while the revocation stream is out of sync,
// a session becomes stale --revocation-stale-timeout (60 s here) after the
// stream was lost, or after its own admission when that came later; never
// while the stream is in sync. The instants are written down from the
// moment of the loss (12:00:00), not computed by the code under test.
func TestStaleSweepAfterTheTimeout(t *testing.T) {
	lost := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	before := &fakeSession{admitted: lost.Add(-time.Hour)}       // admitted before the loss
	during := &fakeSession{admitted: lost.Add(30 * time.Second)} // admitted while out of sync
	r := &Client{stale: time.Minute, downSince: lost, live: map[uint64]Session{1: before, 2: during}}
	for _, tc := range []struct {
		at   string
		want []Session
	}{
		{"12:00:59", nil},
		{"12:01:00", nil}, // exactly the timeout: not yet
		{"12:01:01", []Session{before}},
		{"12:01:30", []Session{before}},
		{"12:01:31", []Session{before, during}},
	} {
		now, err := time.Parse(time.TimeOnly, tc.at)
		if err != nil {
			t.Fatal(err)
		}
		now = time.Date(2026, 12, 4, now.Hour(), now.Minute(), now.Second(), 0, time.UTC)
		if got := r.staleAt(now); !sameSessions(got, tc.want) {
			t.Errorf("at %s: %d stale sessions, want %d", tc.at, len(got), len(tc.want))
		}
	}
	r.inSync = true
	if got := r.staleAt(lost.Add(time.Hour)); len(got) != 0 {
		t.Errorf("in sync: %d stale sessions, want none", len(got))
	}
}

func sameSessions(got, want []Session) bool {
	return len(got) == len(want) && !slices.ContainsFunc(want, func(s Session) bool { return !slices.Contains(got, s) })
}
