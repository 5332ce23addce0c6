// Package testutil holds the helpers the tests of several packages share:
// a log buffer safe for concurrent use, a poller for conditions that have no
// event to wait on, small assertions, and a stand-in for extauthz's signing
// key (identitysig.go). Only _test.go files and test
// fixtures import it; nothing in a binary does.
//
// Prefer an event to a poll: wait on a channel, a log line, a metric the
// code updates, or run the test in a testing/synctest bubble when the code
// takes its time from the time package. Eventually is for state behind a
// real socket or another process, where no event exists.
package testutil
