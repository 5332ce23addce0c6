package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

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

// TestSessionListingSlowClientHoldsNoLock: while the listing's write is
// blocked, a new session is admitted, served and registered (both take the
// bridge's session-table lock; register fails the test after its 5 s
// waits if the listing held it).
func TestSessionListingSlowClientHoldsNoLock(t *testing.T) {
	h := startBridge(t, withSessions)
	h.register(t, testKey(1))
	w := testutil.NewBlockedWriter()
	served := make(chan struct{})
	go func() {
		defer close(served)
		h.srv.listing.ServeHTTP(w, httptestRequest(t, "/debug/sessions"))
	}()
	<-w.Writing
	defer func() { <-served }()
	defer close(w.Released) // also when register fails the test
	h.register(t, testKey(2))
}

func httptestRequest(t *testing.T, target string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(http.MethodGet, "http://bridge"+target, nil)
	must(t, err)
	return r
}

// listingServer is a Server with --debug-sessions and n sessions in its
// table and the listing's index, not serving.
func listingServer(t *testing.T, n int) *Server {
	t.Helper()
	o := testOptions("127.0.0.1:1")
	o.DebugSessions = true
	srv, err := newFromOptions(o, nil, prometheus.NewRegistry())
	must(t, err)
	for i := range n {
		sess := &session{seq: uint64(i + 1), start: time.Now()}
		sess.id.Peer = fmt.Sprintf("node-%d", i)
		srv.sessions[sess] = struct{}{}
		srv.listing.Add(sess)
	}
	return srv
}

// TestSessionListingTakesNoSessionTableLock: with the session-table lock
// (s.mu, which every upgrade and session end takes) held, a listing is
// still served in full. The wait only keeps a regression from hanging the
// test.
func TestSessionListingTakesNoSessionTableLock(t *testing.T) {
	srv := listingServer(t, 5)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	done := make(chan contract.SessionList, 1)
	go func() {
		rec := httptest.NewRecorder()
		srv.listing.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/sessions?limit=1000", nil))
		var l contract.SessionList
		_ = json.Unmarshal(rec.Body.Bytes(), &l)
		done <- l
	}()
	select {
	case l := <-done:
		if l.Live != 5 || len(l.Sessions) != 5 {
			t.Errorf("listing with the table locked: live %d, %d sessions; want 5, 5", l.Live, len(l.Sessions))
		}
	case <-time.After(time.Minute):
		t.Fatal("the listing waits for the session-table lock")
	}
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
			b.srv.listing.Add(sess)
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
