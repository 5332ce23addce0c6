//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/bridge"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/room"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testagent"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// The full-mark bounce through real fronts, against the real
// kube-apiserver: a gateway Pod of its own (extauthz and a bridge with
// --max-sessions=3 and its full mark at 2) behind the shipped nginx file
// and the Envoy stand-in. Under the mark every agent is admitted; at the
// mark a share of new agents is bounced (a 101, then close 1013
// replica_full); at --max-sessions the answer is 503 at_capacity. Who
// draws decides what a bounce costs: with --full-bounce=bridge the bridge
// draws once extauthz has reviewed the token, so each bounced or refused
// agent has cost a TokenReview; with authz extauthz draws from the
// bridge's GET /room (--bridge-room-url) before any TokenReview, so only
// the admitted agents cost one.
const (
	// bounceMax is the Pod's --max-sessions.
	bounceMax = 3
	// bounceUnreadyAt puts the full mark at 2 sessions: 3 × 60 % = 1.8,
	// rounded up (bridge.FullMarks).
	bounceUnreadyAt = 60
	bounceMark      = 2
	// bounceTries bounds the dials at the mark. At 2 sessions of 3 with
	// the mark at 2 each new agent is bounced with chance 1/2 (room.Room
	// Share: (2-2+1)/(3-2+1)), each draw on its own. The loop needs two
	// bounces and then an admission; it fails by bad luck only when 40
	// dials hold fewer than 2 bounces (41/2^40) or only bounces after the
	// second (780/2^40): about 7.5e-10 per front and mode.
	bounceTries = 40
)

// bounceModes are the --full-bounce values the scenario runs, each in a
// Pod of its own.
var bounceModes = []string{bridge.BounceByBridge, bridge.BounceByAuthz}

// testFullReplicaBounce runs the bounce with each of bounceModes through
// nginx and the Envoy stand-in in turn.
func (e *env) testFullReplicaBounce(t *testing.T) {
	for _, mode := range bounceModes {
		t.Run(mode, func(t *testing.T) {
			names := []string{"nginx", "envoy-standin"}
			ids := map[string][]identity{}
			for _, name := range names { // before the Pod: its extauthz is ready once its caches hold them
				ids[name] = e.bounceAgents(t, front{name: name}, mode)
			}
			pod := e.startBouncePod(t, mode)
			for i, f := range bounceFronts(pod, e.fronts[0]) {
				t.Run(f.name, func(t *testing.T) {
					r := &bounceRun{e: e, pod: pod, f: f, mode: mode, ids: ids[names[i]]}
					r.check(t)
				})
			}
		})
	}
}

// bounceAgents makes the fresh Pod-bound agents one front's run may need:
// two under the mark, bounceTries at it, one refused at --max-sessions.
func (e *env) bounceAgents(t *testing.T, f front, mode string) []identity {
	t.Helper()
	ids := make([]identity, bounceMark+bounceTries+1)
	for i := range ids {
		ids[i] = e.podAgent(t, peerName(f, fmt.Sprintf("bounce-%s-%d", mode, i)))
	}
	return ids
}

// startBouncePod starts the Pod for mode; with authz its extauthz reads the
// bridge's room.
func (e *env) startBouncePod(t *testing.T, mode string) *stack.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pod, err := e.stack.StartPod(ctx, stack.PodOptions{
		Name: "bounce-" + mode, ReadRoom: mode == bridge.BounceByAuthz,
		BridgeArgs: []string{"--max-sessions=" + strconv.Itoa(bounceMax),
			"--unready-at=" + strconv.Itoa(bounceUnreadyAt), "--full-bounce=" + mode},
	})
	fatalIf(t, err)
	t.Cleanup(func() { fatalIf(t, pod.Close()) })
	return pod
}

// bounceFronts are the Pod's nginx and stand-in, with the suite's TLS.
func bounceFronts(pod *stack.Pod, like front) []front {
	return []front{
		{name: "nginx", url: "wss://" + pod.NginxAddr + "/relay", base: "https://" + pod.NginxAddr, tls: like.tls},
		{name: "envoy-standin", url: "wss://" + pod.Standin.Addr + "/relay", base: "https://" + pod.Standin.Addr, tls: like.tls},
	}
}

// bounceRun is one front's run against the Pod: the agents it dials in
// order, and what the dials came to.
type bounceRun struct {
	e    *env
	pod  *stack.Pod
	f    front
	mode string
	ids  []identity
	next int

	admitted, bounced, refused int
	reviews                    int // TokenReviews the dials cost, by kube-apiserver's audit log
	held                       []*testagent.Conn
}

// check: under the mark both agents are admitted; at the mark, dials until
// two bounces and then an admission, which is kept (the bridge is then at
// --max-sessions); then 503 at_capacity. Each dial's TokenReviews are
// counted on its own, and the bridge's bounces by who decided them.
func (r *bounceRun) check(t *testing.T) {
	defer r.release(t)
	bouncesBefore := r.bridgeBounces(t)
	for range bounceMark {
		c, got := r.dial(t)
		if got != "admitted" {
			t.Fatalf("%s: under the full mark a new agent was %s, want admitted", r.f.name, got)
		}
		r.held = append(r.held, c)
	}
	r.waitRoom(t, bounceMark)
	for r.bounced < 2 || len(r.held) == bounceMark {
		if r.next == bounceMark+bounceTries {
			t.Fatalf("%s: %d dials at the full mark gave %d bounces and %d admissions, want 2 bounces and then an admission",
				r.f.name, bounceTries, r.bounced, r.admitted-bounceMark)
		}
		c, got := r.dial(t)
		switch {
		case got == "bounced":
		case got == "admitted" && r.bounced >= 2:
			r.held = append(r.held, c) // the bridge is now at --max-sessions
		case got == "admitted":
			c.Close() // back to the mark for the next try
			r.waitRoom(t, bounceMark)
		default:
			t.Fatalf("%s: at the full mark a new agent was %s, want admitted or bounced", r.f.name, got)
		}
	}
	r.waitRoom(t, bounceMax)
	if _, got := r.dial(t); got != "refused "+string(contract.ReasonAtCapacity) {
		t.Fatalf("%s: at --max-sessions a new agent was %s, want refused %s", r.f.name, got, contract.ReasonAtCapacity)
	}
	r.checkReviewTotal(t)
	if n := r.bridgeBounces(t) - bouncesBefore; n != r.bounced {
		t.Errorf("%s: the bridge counted %d bounces decided by %s, want the %d the agents read", r.f.name, n, r.mode, r.bounced)
	}
}

// bridgeBounces is the bridge's count of bounces decided by r.mode.
func (r *bounceRun) bridgeBounces(t *testing.T) int {
	t.Helper()
	body, err := scrape("http://" + r.pod.BridgeMetrics + "/metrics")
	fatalIf(t, err)
	return int(metricSum(body, `wirekube_bridge_bounced_total{decided_by="`+r.mode+`"}`))
}

// checkReviewTotal: with authz the TokenReviews are the admitted agents';
// with bridge every agent dialled cost one.
func (r *bounceRun) checkReviewTotal(t *testing.T) {
	want := r.admitted
	if r.mode == bridge.BounceByBridge {
		want = r.admitted + r.bounced + r.refused
	}
	t.Logf("%s, --full-bounce=%s: %d agents admitted, %d bounced, %d refused at_capacity: %d TokenReviews",
		r.f.name, r.mode, r.admitted, r.bounced, r.refused, r.reviews)
	if r.reviews != want {
		t.Errorf("%s, --full-bounce=%s: %d TokenReviews for %d admitted, %d bounced and %d refused agents, want %d",
			r.f.name, r.mode, r.reviews, r.admitted, r.bounced, r.refused, want)
	}
}

// dial dials the next agent and says what came of it: "admitted" (its
// session echoes; the Conn is returned open), "bounced" (a 101, then close
// 1013 replica_full) or "refused <reason>". It checks the dial's own
// TokenReviews, counted by kube-apiserver and by the Pod's extauthz: one
// for an admitted agent; for a bounced or refused one, one when the bridge
// draws and none when extauthz does.
func (r *bounceRun) dial(t *testing.T) (*testagent.Conn, string) {
	t.Helper()
	id := r.ids[r.next]
	r.next++
	audited, counted := r.e.tokenReviews(t), r.extauthzReviews(t)
	c, got := dialBounce(t, r.f, id)
	audited, counted = r.e.tokenReviews(t)-audited, r.extauthzReviews(t)-counted
	want := 1
	switch {
	case got == "admitted":
		r.admitted++
	case got == "bounced":
		r.bounced++
	default:
		r.refused++
	}
	if got != "admitted" && r.mode == bridge.BounceByAuthz {
		want = 0
	}
	r.reviews += audited
	if audited != want || counted != want {
		t.Errorf("%s, --full-bounce=%s: agent %s %s after %d TokenReviews (kube-apiserver audit log; extauthz counted %d), want %d",
			r.f.name, r.mode, id.peer, got, audited, counted, want)
	}
	return c, got
}

// dialBounce dials id through f and tells a bounce from an admission by
// the first thing the session gives back: its own Data frame, or a close.
func dialBounce(t *testing.T, f front, id identity) (*testagent.Conn, string) {
	t.Helper()
	c, err := testagent.Dial(context.Background(), f.opts(id), id.key)
	var de *testagent.DialError
	if errors.As(err, &de) {
		return nil, fmt.Sprintf("refused %s", de.Reason)
	}
	fatalIf(t, err)
	if c.Response.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("%s: upgrade answered %d", f.name, c.Response.StatusCode)
	}
	payload := randomBytes(32)
	_ = c.SendData(id.key, payload) // a bounced session may be gone already: its close frame is read below
	src, got, err := c.ReadData(ioTimeout)
	if err == nil && src.Equal(id.key) && string(got) == string(payload) {
		return c, "admitted"
	}
	c.Close()
	ce := testagent.CloseOf(err)
	if ce == nil || ce.Code != websocket.CloseTryAgainLater || ce.Text != string(contract.CloseReplicaFull) {
		t.Fatalf("%s: agent %s upgraded, then %v, want its echo or close 1013 %s", f.name, id.peer, err, contract.CloseReplicaFull)
	}
	return nil, "bounced"
}

// release closes the sessions still held and waits until the bridge holds
// none, so that the next front starts from an empty room.
func (r *bounceRun) release(t *testing.T) {
	for _, c := range r.held {
		c.Close()
	}
	r.waitRoom(t, 0)
}

// waitRoom waits until the bridge's room holds n sessions and, when
// extauthz draws, until extauthz has read that room.
func (r *bounceRun) waitRoom(t *testing.T, n int) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("the bridge to hold %d sessions", n), func() bool {
		rm, err := bridgeRoom(r.pod.BridgeMetrics)
		return err == nil && rm.Sessions == n
	})
	if r.mode != bridge.BounceByAuthz {
		return
	}
	testutil.Eventually(t, fmt.Sprintf("extauthz to read a room of %d sessions", n), func() bool {
		body, err := scrape("http://" + r.pod.ExtauthzMetrics + "/metrics")
		return err == nil && metricSum(body, "wirekube_extauthz_bridge_room_sessions") == float64(n) &&
			metricSum(body, "wirekube_extauthz_bridge_room_fresh") == 1
	})
}

// bridgeRoom reads a bridge's GET /room.
func bridgeRoom(metricsAddr string) (room.Room, error) {
	resp, err := http.Get("http://" + metricsAddr + room.Path)
	if err != nil {
		return room.Room{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, room.MaxBody+1))
	if err != nil {
		return room.Room{}, err
	}
	return room.Parse(b)
}

// extauthzReviews is the Pod's extauthz's count of TokenReview calls.
func (r *bounceRun) extauthzReviews(t *testing.T) int {
	t.Helper()
	body, err := scrape("http://" + r.pod.ExtauthzMetrics + "/metrics")
	fatalIf(t, err)
	return int(metricSum(body, "wirekube_extauthz_token_reviews_total"))
}

// metricSum sums the samples of name in a Prometheus text exposition:
// every sample of a family, or the one sample of a name with its whole
// label set.
func metricSum(body, name string) float64 {
	var sum float64
	for line := range strings.Lines(body) {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (!strings.HasPrefix(rest, "{") && !strings.HasPrefix(rest, " ")) {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}
