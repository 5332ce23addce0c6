package extauthz

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wirekube/relay-ws/extauthz/internal/signkeys"
	"github.com/wirekube/relay-ws/extauthz/internal/steering"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/identitysig"
	"github.com/wirekube/relay-ws/internal/room"
)

// fixedRoom answers one room, fresh or stale.
type fixedRoom struct {
	r     room.Room
	fresh bool
}

func (f fixedRoom) Room() (room.Room, bool) { return f.r, f.fresh }

// steered is an env whose Authorizer reads rm and draws dice for the
// bounce.
func steered(t *testing.T, rm Rooms, dice float64) *env {
	t.Helper()
	e := newEnv(t, nil)
	e.authz.steering = steering.New(rm, func() float64 { return dice })
	return e
}

// TestFullRoomRefusedBeforeTokenReview: with a fresh room of a bridge at
// --max-sessions (or past it) a relay check is answered 503 at_capacity,
// and of a draining bridge 503 draining, and the fake API saw no
// TokenReview.
func TestFullRoomRefusedBeforeTokenReview(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    room.Room
		want contract.Reason
	}{
		{"at max", room.Room{Sessions: 100, FullAt: 95, Max: 100}, contract.ReasonAtCapacity},
		{"past max", room.Room{Sessions: 130, FullAt: 95, Max: 100}, contract.ReasonAtCapacity},
		{"draining", room.Room{Sessions: 3, FullAt: 95, Max: 100, Draining: true}, contract.ReasonDraining},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := steered(t, fixedRoom{tc.r, true}, 0)
			d := e.authz.Decide(context.Background(), requestFromCheck(relayCheck(e.answer(static(podBound())), nil)))
			if d.Reason != tc.want || d.Status() != 503 {
				t.Fatalf("decision %q (%d), want %q (503)", d.Reason, d.Status(), tc.want)
			}
			if n := e.reviews.Load(); n != 0 {
				t.Fatalf("%d TokenReviews, want none", n)
			}
		})
	}
}

// TestBounceAnswer: a fresh room one session below --max-sessions (share
// 5/6) and a draw of 0.8 bounce: over gRPC and HTTP alike the allow answer
// carries X-WireKube-Binding: bounce, the client address and a signature
// that verifies over those two fields alone, and no other identity
// header; no TokenReview is made; the check counts and logs as bounce /
// bounced.
func TestBounceAnswer(t *testing.T) {
	for _, front := range []string{"grpc", "http"} {
		t.Run(front, func(t *testing.T) {
			keysFile := filepath.Join(t.TempDir(), "keys")
			var logs bytes.Buffer
			e := newEnvLogging(t, &logs)
			e.authz.steering = steering.New(fixedRoom{room.Room{Sessions: 99, FullAt: 95, Max: 100}, true}, func() float64 { return 0.8 })
			kr, err := signkeys.Load(SigningOptions{IdentityKeysFile: keysFile})
			must(t, err)
			must(t, e.authz.installKeyring(kr, SigningOptions{IdentityKeysFile: keysFile}))
			tok := e.answer(static(podBound()))
			got := map[string][]string{}
			if front == "grpc" {
				resp, _ := e.srv.Check(fromLoopback(), relayCheck(tok, nil))
				for _, h := range resp.GetOkResponse().GetHeaders() {
					got[h.GetHeader().GetKey()] = append(got[h.GetHeader().GetKey()], h.GetHeader().GetValue())
				}
			} else {
				w := bounceOverHTTP(e, tok)
				for _, name := range contract.IdentityHeaders {
					if vs := w.Header().Values(name); len(vs) > 0 {
						got[name] = vs
					}
				}
			}
			checkBounceHeaders(t, got, keysFile, "192.0.2.10")
			if n := e.reviews.Load(); n != 0 {
				t.Fatalf("%d TokenReviews, want none", n)
			}
			if n := testutil.ToFloat64(e.authz.metrics.checks.WithLabelValues(front, "bounce", "bounced")); n != 1 {
				t.Fatalf("checks_total{result=bounce,reason=bounced} = %v, want 1", n)
			}
			if got := checkLines(t, logs.Bytes()); !slices.Equal(got, []string{"bounce bounced"}) {
				t.Fatalf("check lines (result reason) %q, want [bounce bounced]", got)
			}
		})
	}
}

// checkLines returns "result reason" of each check line in logs.
func checkLines(t *testing.T, logs []byte) []string {
	t.Helper()
	var out []string
	for _, l := range bytes.Split(bytes.TrimSpace(logs), []byte("\n")) {
		var line struct{ Msg, Result, Reason string }
		must(t, json.Unmarshal(l, &line))
		if line.Msg == "check" {
			out = append(out, line.Result+" "+line.Reason)
		}
	}
	return out
}

// bounceOverHTTP asks the HTTP front, as the nginx snippet does, from a
// loopback front that saw the client at 192.0.2.10.
func bounceOverHTTP(e *env, tok string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set("X-Original-Uri", "/relay")
	r.Header.Set("X-Original-Method", "GET")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Connection", "upgrade")
	r.Header.Set("X-Forwarded-For", "192.0.2.10")
	w := httptest.NewRecorder()
	(&HTTPHandler{Authorizer: e.authz}).ServeHTTP(w, r)
	return w
}

// checkBounceHeaders: exactly the binding, the client address and one
// signature, which the bridge's verifier accepts over Fields{Binding:
// bounce, ClientAddress: client}.
func checkBounceHeaders(t *testing.T, got map[string][]string, keysFile, client string) {
	t.Helper()
	names := make([]string, 0, len(got))
	for name := range got {
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"X-WireKube-Binding", "X-WireKube-Client-Address", "X-WireKube-Signature"}
	if !slices.Equal(names, want) {
		t.Fatalf("identity headers %v, want %v (answer %v)", names, want, got)
	}
	if !slices.Equal(got["X-WireKube-Binding"], []string{"bounce"}) || !slices.Equal(got["X-WireKube-Client-Address"], []string{client}) {
		t.Fatalf("binding %q, client address %q; want [bounce], [%s]", got["X-WireKube-Binding"], got["X-WireKube-Client-Address"], client)
	}
	keys := identitysig.NewFileKeys(keysFile, time.Second)
	v := &identitysig.Verifier{Keys: keys.Lookup, MACKeys: keys.LookupMAC, MaxAge: 30 * time.Second, Replay: identitysig.NewReplayCache(4)}
	if _, reason, err := v.Check(got["X-WireKube-Signature"], identitysig.Fields{Binding: "bounce", ClientAddress: client}); reason != "" {
		t.Fatalf("signature over the bounce fields: %q (%v)", reason, err)
	}
}

// TestSteeringLeavesTheCheckAlone: below the full mark (share 0, even a
// draw of 0), with a stale room of a full bridge, for a probe (only the
// probe subprotocol) and on an --authn-only-path, the check runs as
// without steering: one TokenReview and the ordinary answer.
func TestSteeringLeavesTheCheckAlone(t *testing.T) {
	full := room.Room{Sessions: 100, FullAt: 95, Max: 100}
	probe := func(h map[string]string) { h["sec-websocket-protocol"] = contract.SubprotocolProbe }
	for _, tc := range []struct {
		name  string
		rm    fixedRoom
		check func(e *env) Decision
		peer  string
	}{
		{"share 0", fixedRoom{room.Room{Sessions: 94, FullAt: 95, Max: 100}, true}, func(e *env) Decision {
			return e.authz.Decide(context.Background(), requestFromCheck(relayCheck(e.answer(static(podBound())), nil)))
		}, "node-a"},
		{"stale room", fixedRoom{full, false}, func(e *env) Decision {
			return e.authz.Decide(context.Background(), requestFromCheck(relayCheck(e.answer(static(podBound())), nil)))
		}, "node-a"},
		{"probe", fixedRoom{full, true}, func(e *env) Decision {
			return e.authz.Decide(context.Background(), requestFromCheck(relayCheck(e.answer(static(podBound())), probe)))
		}, "node-a"},
		{"authn-only path", fixedRoom{full, true}, func(e *env) Decision {
			tok := e.answerToken(promSpec(e).sign(), static(saStatus("monitoring", "prometheus", "uid-sa-prom", nil)))
			return e.authz.Decide(context.Background(), requestFromCheck(checkRequest("GET", "/metrics", tok, nil)))
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := steered(t, tc.rm, 0)
			d := tc.check(e)
			if !d.Allowed() || d.Bounced || d.Peer != tc.peer {
				t.Fatalf("decision %q bounced %v peer %q, want an allow of peer %q", d.Reason, d.Bounced, d.Peer, tc.peer)
			}
			if n := e.reviews.Load(); n != 1 {
				t.Fatalf("%d TokenReviews, want 1", n)
			}
		})
	}
}
