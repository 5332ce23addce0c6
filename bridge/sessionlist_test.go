package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

var listQueryCases = []struct {
	name, raw string
	want      listQuery
	err       string // substring of the error; empty: no error
}{
	{"empty", "", listQuery{limit: 100}, ""},
	{"limit", "limit=7", listQuery{limit: 7}, ""},
	{"limit max", "limit=1000", listQuery{limit: 1000}, ""},
	{"after and peer", "after=42&peer=node-b", listQuery{limit: 100, after: 42, peer: "node-b"}, ""},
	{"escaped peer", "peer=node%2Da", listQuery{limit: 100, peer: "node-a"}, ""},
	{"limit zero", "limit=0", listQuery{}, "limit: want an integer from 1 to 1000"},
	{"limit above max", "limit=1001", listQuery{}, "limit: want an integer from 1 to 1000"},
	{"limit negative", "limit=-1", listQuery{}, "limit: want"},
	{"limit not a number", "limit=ten", listQuery{}, `got "ten"`},
	{"limit empty", "limit", listQuery{}, "limit: want"},
	{"after negative", "after=-3", listQuery{}, "after: want a session id"},
	{"after overflow", "after=18446744073709551616", listQuery{}, "after: want"},
	{"peer with space", "peer=node+a", listQuery{}, `peer: want a WireKubePeer name`},
	{"peer empty", "peer=", listQuery{}, "peer: want"},
	{"peer control byte escaped in error", "peer=%1b%5B31m", listQuery{}, `got "\x1b[31m"`},
	{"repeated", "limit=1&limit=2", listQuery{}, "limit: given 2 times"},
	{"unknown", "offset=3", listQuery{}, `"offset": unknown parameter`},
	{"bad escape", "peer=%zz", listQuery{}, "query: "},
	{"semicolon", "limit=1;after=2", listQuery{}, "query: "},
}

func TestParseListQuery(t *testing.T) {
	for _, tc := range listQueryCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseListQuery(tc.raw)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseListQuery(%q) = %+v, %v; want error containing %q", tc.raw, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseListQuery(%q) = %+v, %v; want %+v", tc.raw, got, err, tc.want)
			}
		})
	}
}

func FuzzParseListQuery(f *testing.F) {
	for _, tc := range listQueryCases {
		f.Add(tc.raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseListQuery(raw)
		if err != nil {
			return
		}
		if q.limit < 1 || q.limit > contract.SessionsLimitMax {
			t.Fatalf("parseListQuery(%q): limit %d out of bounds", raw, q.limit)
		}
		if q.peer != "" && !printable(q.peer) {
			t.Fatalf("parseListQuery(%q): peer %q not printable", raw, q.peer)
		}
	})
}

// getSessions fetches the listing from the harness's metrics listener.
func getSessions(t *testing.T, h *harness, query string) (int, string, contract.SessionList) {
	t.Helper()
	resp, err := http.Get(h.admin + "/debug/sessions" + query)
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	var l contract.SessionList
	if resp.StatusCode == http.StatusOK {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q, want application/json", ct)
		}
		must(t, json.Unmarshal(body, &l))
	}
	return resp.StatusCode, string(body), l
}

func withSessions(o *Options) { o.DebugSessions = true }

func TestSessionListingIsOffByDefault(t *testing.T) {
	h := startBridge(t, nil)
	h.register(t, testKey(1))
	if status, _, _ := getSessions(t, h, ""); status != http.StatusNotFound {
		t.Fatalf("GET /debug/sessions without --debug-sessions: %d, want 404", status)
	}
}

func TestSessionListingRefusesBadRequests(t *testing.T) {
	h := startBridge(t, withSessions)
	for _, tc := range []struct{ query, body string }{
		{"?limit=5000", "limit: want an integer from 1 to 1000, got \"5000\"\n"},
		{"?peer=a%0Ab", "peer: want a WireKubePeer name (printable, no spaces, at most 512 bytes), got \"a\\nb\"\n"},
		{"?cursor=1", "\"cursor\": unknown parameter (want limit, after, peer)\n"},
	} {
		status, body, _ := getSessions(t, h, tc.query)
		if status != http.StatusBadRequest || body != tc.body {
			t.Errorf("GET %s: %d %q, want 400 %q", tc.query, status, body, tc.body)
		}
	}
	resp, err := http.Post(h.admin+"/debug/sessions", "text/plain", nil)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %d Allow %q, want 405 GET, HEAD", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestSessionListingShowsEachSession: two peers, one session each; the
// listing shows each one's identity, key fingerprint (computed with
// sha256sum, not with Fingerprint), times, request id and counters.
func TestSessionListingShowsEachSession(t *testing.T) {
	h := startBridge(t, withSessions)
	k1, k2 := testKey(1), testKey(2)
	hdr := identityOf("node-a", k1)
	hdr.Set(contract.HeaderRequestID, "req-0001")
	ws1 := h.dial(t, hdr)
	send(t, ws1, relayproto.AppendRegister(nil, k1))
	waitRegistered(t, h, k1) // session ids follow the upgrades' order
	ws2 := h.dial(t, identityOf("node-b", k2))
	send(t, ws2, relayproto.AppendRegister(nil, k2))
	waitRegistered(t, h, k2)
	// node-a sends itself one Data frame of 2 payload bytes: 5+32+2 bytes
	// each way, after the Register's 5+32 to the relay.
	send(t, ws1, relayproto.AppendData(nil, k1, []byte("hi")))
	must(t, ws1.SetReadDeadline(time.Now().Add(5*time.Second)))
	if _, _, err := ws1.ReadMessage(); err != nil {
		t.Fatalf("echo: %v", err)
	}
	const sa = "system:serviceaccount:wirekube-system:"
	want := []contract.SessionInfo{
		{ID: "1", Peer: "node-a", Identity: sa + "node-a", Key: "ae216c2e", ClientAddress: "unknown", Expires: "2030-01-02T03:04:05Z",
			RequestID: "req-0001", BytesToRelay: 37 + 39, BytesToClient: 39, FramesToRelay: 2, FramesToClient: 1},
		{ID: "2", Peer: "node-b", Identity: sa + "node-b", Key: "6f103f3d", ClientAddress: "unknown", Expires: "2030-01-02T03:04:05Z",
			BytesToRelay: 37, FramesToRelay: 1},
	}
	// The byte counters are added right after each write returns, so the
	// echo (and node-b's verified Register) can reach the test first: read
	// until both sessions show them.
	var got contract.SessionList
	for range 500 {
		_, _, got = getSessions(t, h, "")
		if len(got.Sessions) == 2 && got.Sessions[0].BytesToClient == want[0].BytesToClient &&
			got.Sessions[0].BytesToRelay == want[0].BytesToRelay && got.Sessions[1].BytesToRelay == want[1].BytesToRelay {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got.Live != 2 || got.Next != "" || len(got.Sessions) != 2 {
		t.Fatalf("listing %+v, want live 2, no next page, 2 sessions", got)
	}
	for i, s := range got.Sessions {
		since, err := time.Parse(time.RFC3339, s.Since)
		if err != nil || time.Since(since) > time.Hour || time.Until(since) > time.Second {
			t.Errorf("session %d since %q: want the RFC 3339 time of the upgrade", i, s.Since)
		}
		s.Since = ""
		if s != want[i] {
			t.Errorf("session %d:\n got %+v\nwant %+v", i, s, want[i])
		}
	}
	_, body, _ := getSessions(t, h, "")
	if strings.Contains(body, k1.Base64()) || strings.Contains(body, k2.Base64()) {
		t.Fatalf("listing contains a whole key: %s", body)
	}
}

func waitRegistered(t *testing.T, h *harness, k relayproto.Key) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.relay.WaitRegistered(ctx, k); err != nil {
		t.Fatalf("relay never saw Register: %v", err)
	}
}

// TestSessionListingPages: five sessions of two peers, pages of two; a
// session closed between pages neither shifts nor repeats the others.
func TestSessionListingPages(t *testing.T) {
	h := startBridge(t, withSessions)
	var conns []*websocket.Conn
	for i, peer := range []string{"node-a", "node-b", "node-a", "node-b", "node-a"} {
		k := testKey(byte(10 * (i + 1)))
		ws := h.dial(t, identityOf(peer, k))
		send(t, ws, relayproto.AppendRegister(nil, k))
		waitRegistered(t, h, k)
		conns = append(conns, ws)
	}
	ids := func(l contract.SessionList) string {
		var s []string
		for _, e := range l.Sessions {
			s = append(s, e.Peer+"#"+e.ID)
		}
		return strings.Join(s, ",") + " next=" + l.Next
	}
	_, _, p1 := getSessions(t, h, "?limit=2")
	if got := ids(p1); got != "node-a#1,node-b#2 next=2" || p1.Live != 5 {
		t.Fatalf("page 1: %s (live %d), want node-a#1,node-b#2 next=2 (live 5)", got, p1.Live)
	}
	conns[2].Close() // session 3
	for range 500 {
		if _, _, l := getSessions(t, h, ""); l.Live == 4 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, tc := range []struct{ query, want string }{
		{"?limit=2&after=2", "node-b#4,node-a#5 next="},
		{"?limit=1&after=2", "node-b#4 next=4"},
		{"?limit=2&after=5", " next="},
		{"?peer=node-a", "node-a#1,node-a#5 next="},
		{"?peer=node-b&limit=1&after=2", "node-b#4 next="},
		{"?peer=node-c", " next="},
	} {
		if _, _, l := getSessions(t, h, tc.query); ids(l) != tc.want {
			t.Errorf("GET %s: %s, want %s", tc.query, ids(l), tc.want)
		}
	}
}

// blockedWriter is a ResponseWriter whose Write blocks until released, as
// a listing client that stopped reading.
type blockedWriter struct {
	h        http.Header
	writing  chan struct{}
	released chan struct{}
}

func (w *blockedWriter) Header() http.Header { return w.h }
func (w *blockedWriter) WriteHeader(int)     {}
func (w *blockedWriter) Write(p []byte) (int, error) {
	close(w.writing)
	<-w.released
	return len(p), nil
}

// TestSessionListingSlowClientHoldsNoLock: while the listing's write is
// blocked, a new session is admitted, served and registered (both take the
// bridge's session-table lock; register fails the test after its 5 s
// waits if the listing held it).
func TestSessionListingSlowClientHoldsNoLock(t *testing.T) {
	h := startBridge(t, withSessions)
	h.register(t, testKey(1))
	w := &blockedWriter{h: http.Header{}, writing: make(chan struct{}), released: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		h.srv.handleSessions(w, httptestRequest(t, "/debug/sessions"))
	}()
	<-w.writing
	defer func() { <-served }()
	defer close(w.released) // also when register fails the test
	h.register(t, testKey(2))
}

func httptestRequest(t *testing.T, target string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(http.MethodGet, "http://bridge"+target, nil)
	must(t, err)
	return r
}

// BenchmarkSessionSnapshot measures the listing's copy of the index
// (snapshot, under no lock of the server) and the whole page
// (listSessions) with 20,000 live sessions, the default --max-sessions.
func BenchmarkSessionSnapshot(b *testing.B) {
	srv, err := newFromOptions(testOptions("127.0.0.1:1"), nil, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	for i := range 20000 {
		sess := &session{seq: uint64(i + 1), start: time.Now()}
		sess.id.Peer = fmt.Sprintf("node-%d", i)
		srv.listing.m.Store(sess, struct{}{})
	}
	q := listQuery{limit: contract.SessionsLimitDefault}
	b.Run("snapshot", func(b *testing.B) {
		for b.Loop() {
			srv.listing.snapshot()
		}
	})
	b.Run("page_of_100", func(b *testing.B) {
		for b.Loop() {
			srv.listSessions(q)
		}
	})
	b.Run("page_of_peer", func(b *testing.B) {
		q := listQuery{limit: contract.SessionsLimitDefault, peer: "node-7"}
		for b.Loop() {
			srv.listSessions(q)
		}
	})
}

// TestSessionListingStuckReaderReleasesTurn: a client that asks for a
// page larger than the server's write buffer and never reads holds the
// listing's only turn (a second lister gets 429 sessions_list_busy) until
// --write-timeout, and from then on a second lister gets its page.
func TestSessionListingStuckReaderReleasesTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const writeTimeout = 10 * time.Second
		b := startBubble(t, func(o *Options) { withSessions(o); o.WriteTimeout = writeTimeout })
		for i := range 200 { // about 60 KB of JSON: more than net/http's 4 KiB buffer
			sess := &session{seq: uint64(i + 1), start: time.Now()}
			sess.id.Peer = fmt.Sprintf("node-%d", i)
			b.srv.listing.add(sess)
		}
		stuck, err := b.admin.DialContext(t.Context(), "", "")
		must(t, err)
		defer stuck.Close()
		_, err = io.WriteString(stuck, "GET /debug/sessions?limit=1000 HTTP/1.1\r\nHost: bridge\r\n\r\n")
		must(t, err)
		synctest.Wait() // the listing is written into the pipe no one reads

		if code, reason := b.getSessions(t, "/debug/sessions?limit=1"); code != http.StatusTooManyRequests ||
			reason != string(contract.ReasonSessionsListBusy) {
			t.Fatalf("while the stuck write is within --write-timeout: %d %q, want 429 %s", code, reason, contract.ReasonSessionsListBusy)
		}
		time.Sleep(writeTimeout)
		synctest.Wait()
		if code, reason := b.getSessions(t, "/debug/sessions?limit=1"); code != http.StatusOK {
			t.Fatalf("after --write-timeout: %d %q, want 200 and the page", code, reason)
		}
	})
}

// getSessions is the status and deny reason of a listing on the bubble's
// metrics listener; the body is read to its end.
func (b *bubble) getSessions(t *testing.T, target string) (int, string) {
	t.Helper()
	resp, err := b.http.Get("http://bridge" + target)
	must(t, err)
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	must(t, err)
	return resp.StatusCode, resp.Header.Get(contract.HeaderDenyReason)
}
