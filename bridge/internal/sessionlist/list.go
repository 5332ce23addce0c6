// Package sessionlist is the bridge's session listing (GET
// contract.SessionsPath on the metrics listener, only with --debug-sessions;
// docs/bridge.md#who-is-connected): its own index of the live sessions, the
// query parsed and bounded, the listing's turn and rate, and the page of
// contract.SessionList. It imports nothing of the bridge: the bridge hands
// it each session as a Session when the session starts and ends, and the
// deny answer it writes.
//
// The handler takes the listing's turn (gate: one at a time, a rate),
// copies the index's session references (no lock an upgrade takes), then
// filters, sorts and reads each session's immutable identity and atomic
// counters, and encodes the page into memory before writing it: a slow
// reader of the listing holds no lock a session needs.
package sessionlist

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// Session is what the listing reads of one live session. Its methods are
// safe for concurrent use while the session runs; Seq and Peer never change
// once the session is added.
type Session interface {
	// Seq names the session: increasing, never reused while the bridge runs.
	Seq() uint64
	// Peer is the WireKubePeer the session was admitted for.
	Peer() string
	// Info is the session's listing entry. Never the whole key.
	Info() contract.SessionInfo
}

// Listing serves the session listing. Safe for concurrent use.
type Listing struct {
	writeTimeout time.Duration
	deny         func(http.ResponseWriter, contract.Reason)
	gate         gate
	// index is the listing's own copy of the session table: a sync.Map,
	// whose Range holds no lock that admitting or ending a session takes,
	// so a listing never holds the bridge's session-table lock (taken by
	// every upgrade) for a walk of 20,000 sessions. A session is added
	// before it can be listed and removed when it ends; a listing sees
	// each session present during its whole walk.
	index sync.Map // Session -> struct{}
}

// New returns the listing. writeTimeout bounds the write of one page
// (--write-timeout); deny writes a refusal (429 with the reason and
// Retry-After: 1, as every deny of the bridge).
func New(writeTimeout time.Duration, deny func(http.ResponseWriter, contract.Reason)) *Listing {
	return &Listing{writeTimeout: writeTimeout, deny: deny}
}

// Add lists sess until Remove. A nil Listing (no --debug-sessions) keeps
// nothing.
func (l *Listing) Add(sess Session) {
	if l != nil {
		l.index.Store(sess, struct{}{})
	}
}

// Remove ends the listing of sess.
func (l *Listing) Remove(sess Session) {
	if l != nil {
		l.index.Delete(sess)
	}
}

// snapshot returns the indexed sessions.
func (l *Listing) snapshot() []Session {
	var all []Session
	l.index.Range(func(k, _ any) bool {
		all = append(all, k.(Session))
		return true
	})
	return all
}

// ServeHTTP answers GET and HEAD of contract.SessionsPath.
func (l *Listing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q, err := parseListQuery(r.URL.RawQuery)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if reason := l.gate.enter(time.Now()); reason != "" {
		l.deny(w, reason) // 429, Retry-After: 1
		return
	}
	defer l.gate.leave()
	var body bytes.Buffer
	if err := json.NewEncoder(&body).Encode(l.page(q)); err != nil {
		http.Error(w, "encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(body.Len()))
	// The turn lasts until the last byte is written: a client that asks for
	// a large page and never reads would hold it (the metrics server has no
	// write timeout, /metrics must not lose its scrape). --write-timeout
	// bounds this write like every other write to a client; past it the
	// write fails, the connection is closed and the turn is free. A
	// ResponseWriter that cannot take a deadline (an embedder's wrapper
	// without Unwrap) keeps the old behaviour.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(l.writeTimeout))
	_, _ = w.Write(body.Bytes())
}

// page returns the page of live sessions q asks for.
func (l *Listing) page(q listQuery) contract.SessionList {
	all := l.snapshot()
	out := contract.SessionList{Live: len(all), Sessions: []contract.SessionInfo{}}
	// A session's seq and peer are set before it is added to the index,
	// whose Range loaded it: safe to read here.
	page := all[:0]
	for _, sess := range all {
		if sess.Seq() > q.after && (q.peer == "" || sess.Peer() == q.peer) {
			page = append(page, sess)
		}
	}
	slices.SortFunc(page, func(a, b Session) int { return cmp.Compare(a.Seq(), b.Seq()) })
	if len(page) > q.limit {
		page = page[:q.limit]
		out.Next = strconv.FormatUint(page[len(page)-1].Seq(), 10)
	}
	for _, sess := range page {
		out.Sessions = append(out.Sessions, sess.Info())
	}
	return out
}
