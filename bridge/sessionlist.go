package bridge

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// The session listing (GET /debug/sessions on the metrics listener, only
// with --debug-sessions; docs/bridge.md#who-is-connected). The handler
// takes the listing's turn (listGate: one at a time, a rate), copies the
// listing index's session pointers (sessionIndex: no lock an upgrade
// takes), then filters, sorts and reads each session's immutable identity
// and atomic counters, and encodes the page into memory before writing it:
// a slow reader of the listing holds no lock a session needs.

// listQuery is a parsed listing query.
type listQuery struct {
	limit int    // page size, 1..contract.SessionsLimitMax
	after uint64 // list sessions with a larger seq only
	peer  string // only this WireKubePeer; empty: every peer
}

// parseListQuery parses the raw query of a listing request: limit, after
// and peer, each at most once, nothing else. The errors name the parameter
// and quote the value (%q escapes it).
func parseListQuery(raw string) (listQuery, error) {
	q := listQuery{limit: contract.SessionsLimitDefault}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return listQuery{}, fmt.Errorf("query: %w", err)
	}
	for name, v := range vals {
		if len(v) > 1 {
			return listQuery{}, fmt.Errorf("%s: given %d times, want at most once", name, len(v))
		}
		if err := q.set(name, v[0]); err != nil {
			return listQuery{}, err
		}
	}
	return q, nil
}

func (q *listQuery) set(name, v string) error {
	switch name {
	case "limit":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > contract.SessionsLimitMax {
			return fmt.Errorf("limit: want an integer from 1 to %d, got %q", contract.SessionsLimitMax, v)
		}
		q.limit = n
	case "after":
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("after: want a session id (the next cursor of a page), got %q", v)
		}
		q.after = n
	case "peer":
		if !printable(v) {
			return fmt.Errorf("peer: want a WireKubePeer name (printable, no spaces, at most %d bytes), got %q", maxHeaderValue, v)
		}
		q.peer = v
	default:
		return fmt.Errorf("%q: unknown parameter (want limit, after, peer)", name)
	}
	return nil
}

func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request) {
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
	if reason := s.lists.enter(time.Now()); reason != "" {
		writeDeny(w, reason) // 429, Retry-After: 1
		return
	}
	defer s.lists.leave()
	var body bytes.Buffer
	if err := json.NewEncoder(&body).Encode(s.listSessions(q)); err != nil {
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
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	_, _ = w.Write(body.Bytes())
}

// listSessions returns the page of live sessions q asks for.
func (s *Server) listSessions(q listQuery) contract.SessionList {
	all := s.listing.snapshot()
	out := contract.SessionList{Live: len(all), Sessions: []contract.SessionInfo{}}
	// A session's seq and identity are set before it is stored in the
	// listing index, whose Range loaded it: safe to read here.
	page := all[:0]
	for _, sess := range all {
		if sess.seq > q.after && (q.peer == "" || sess.id.Peer == q.peer) {
			page = append(page, sess)
		}
	}
	slices.SortFunc(page, func(a, b *session) int { return cmp.Compare(a.seq, b.seq) })
	if len(page) > q.limit {
		page = page[:q.limit]
		out.Next = strconv.FormatUint(page[len(page)-1].seq, 10)
	}
	for _, sess := range page {
		out.Sessions = append(out.Sessions, sess.info())
	}
	return out
}

// info is the session's listing entry: its identity is immutable and its
// counters atomic, so no lock is needed. Never the whole key.
func (sess *session) info() contract.SessionInfo {
	return contract.SessionInfo{
		ID:             strconv.FormatUint(sess.seq, 10),
		Peer:           sess.id.Peer,
		Identity:       sess.id.Subject,
		Key:            sess.id.Key.Fingerprint(),
		ClientAddress:  sess.id.ClientAddress,
		Since:          sess.start.UTC().Format(time.RFC3339),
		Expires:        sess.id.TokenExpires.UTC().Format(time.RFC3339),
		RequestID:      sess.id.RequestID,
		BytesToRelay:   sess.bytesToRelay.Load(),
		BytesToClient:  sess.bytesToClient.Load(),
		FramesToRelay:  sess.framesToRelay.Load(),
		FramesToClient: sess.framesToClient.Load(),
	}
}
