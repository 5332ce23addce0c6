package testutil

import (
	"testing"
	"time"
)

// WaitTimeout bounds Eventually. Generous: it is reached only when the test
// fails, and shared CI machines are slow.
const WaitTimeout = 10 * time.Second

// pollInterval is the wait between two checks of the condition.
const pollInterval = 5 * time.Millisecond

// Eventually checks cond until it holds, and fails the test (naming what)
// when it still does not after WaitTimeout. Inside a testing/synctest bubble
// the wait between checks is fake time, so a condition that depends on other
// goroutines of the bubble is checked after each of them has run.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, WaitTimeout, what, cond)
}

// EventuallyWithin is Eventually with its own bound.
func EventuallyWithin(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(pollInterval)
	}
}
