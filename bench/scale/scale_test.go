package scale

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wirekube/relay-ws/internal/test/testutil"
)

func TestMain(m *testing.M) {
	if asked, err := RunGeneratorIfAsked(); asked {
		if err != nil {
			fmt.Fprintln(os.Stderr, "scale generator:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m, testutil.ClientGoLeaks()...)
}

// The size of the run as flags (they win over the environment variables):
// go test -run '^$' -bench BenchmarkScale ./bench/scale/ -args -scale.agents=6000 -scale.burst=300
var (
	agentsFlag = flag.Int("scale.agents", 0, "agents in the run (default "+EnvAgents+" or 3000)")
	burstFlag  = flag.Int("scale.burst", 0, "Pods deleted in the burst (default "+EnvBurst+" or 300)")
	modeFlag   = flag.String("scale.on-review-throttled", "", "every extauthz's --on-review-throttled (default deny)")
	unreadyAt  = flag.Int("scale.unready-at", DefaultUnreadyAt, "every bridge's --unready-at (0: off)")
	bridgeArgs = flag.String("scale.bridge-args", "", "more flags for every bridge, space-separated, after the run's own (the last of a flag wins): for trying a setting at a smaller size, e.g. --max-sessions=1570; the table's texts still name the defaults")
	fullBounce = flag.String("scale.full-bounce", "authz", "every bridge's --full-bounce (authz: extauthz beside it draws, given --bridge-room-url; bridge; off)")
)

func cmpOrInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// BenchmarkScale is the many-agents run at DefaultConfig's size
// (WIREKUBE_SCALE_AGENTS, WIREKUBE_SCALE_BURST). It runs once whatever
// b.N is and prints its table.
func BenchmarkScale(b *testing.B) {
	if b.N > 1 {
		b.Skip("runs once")
	}
	cfg, err := DefaultConfig()
	if *agentsFlag != 0 || *burstFlag != 0 {
		cfg, err = SizedConfig(cmpOrInt(*agentsFlag, cfg.Agents), cmpOrInt(*burstFlag, cfg.Burst))
	}
	if err != nil {
		b.Fatal(err)
	}
	if *modeFlag != "" {
		cfg.OnReviewThrottled = *modeFlag
	}
	cfg.UnreadyAt, cfg.FullBounce, cfg.BridgeArgs = *unreadyAt, *fullBounce, strings.Fields(*bridgeArgs)
	res, err := Run(context.Background(), cfg, os.Stderr)
	if err != nil {
		b.Fatal(err)
	}
	res.Print(os.Stdout)
	b.ReportMetric(res.Burst.LastClose.Seconds(), "burst-last-close-s")
	b.ReportMetric(res.Kill.LastAdmission.Seconds(), "failover-last-admission-s")
}

// TestDialOrderSpreadsALostReplicasAgents: an agent tries its own
// replica first, then every other exactly once, and the replica it lands
// on when its own and two others are gone is each of the other three about
// equally often (a Service's random pick among its endpoints).
func TestDialOrderSpreadsALostReplicasAgents(t *testing.T) {
	const n, draws = 6, 6000
	gone := map[int]bool{0: true, 4: true, 5: true}
	landed := map[int]int{}
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range draws {
		order := dialOrder(genAgent{I: i, Replica: 0}, n, rnd)
		seen := map[int]bool{}
		for _, r := range order {
			seen[r] = true
		}
		if order[0] != 0 || len(order) != n || len(seen) != n {
			t.Fatalf("order %v: want replica 0 first, then each of the other %d once", order, n-1)
		}
		for _, r := range order {
			if !gone[r] {
				landed[r]++
				break
			}
		}
	}
	for _, r := range []int{1, 2, 3} {
		if share := float64(landed[r]) / draws; share < 0.30 || share > 0.37 {
			t.Errorf("replica %d took %.3f of the agents, want about 1/3 (landed %v)", r, share, landed)
		}
	}
}

// TestParseAPICounts sums apiserver_request_total, all and tokenreviews.
func TestParseAPICounts(t *testing.T) {
	page := `# HELP apiserver_request_total x
apiserver_request_total{code="201",resource="tokenreviews",verb="POST"} 12
apiserver_request_total{code="200",resource="pods",verb="LIST"} 3
apiserver_request_total_other 100
apiserver_request_duration_seconds_count{resource="tokenreviews"} 7
`
	if got := parseAPICounts([]byte(page)); got != (apiCounts{all: 15, tokenReviews: 12}) {
		t.Errorf("parsed %+v, want all 15, tokenReviews 12", got)
	}
}

// TestQuantileNearestRank: p50 and p99 of 1..100 ms are 50 and 99 ms.
func TestQuantileNearestRank(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	if q := quantile(s, 0.5); q != 50*time.Millisecond {
		t.Errorf("p50 %s, want 50ms", q)
	}
	if q := quantile(s, 0.99); q != 99*time.Millisecond {
		t.Errorf("p99 %s, want 99ms", q)
	}
}

// TestTransportReason names the dials that got no HTTP answer.
func TestTransportReason(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.Join(&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), "connect_refused"},
		{fmt.Errorf("handshake: %w", context.DeadlineExceeded), "timeout"},
		{errors.Join(os.NewSyscallError("connect", syscall.ECONNREFUSED), fmt.Errorf("dial: %w", context.DeadlineExceeded)), "timeout"},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), "closed"},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, "closed"},
		{errors.New("x509: unknown authority"), "other"},
		{fmt.Errorf("dial: %w", errNoEndpoint), "no_endpoint"},
	} {
		if got := transportReason(c.err); got != c.want {
			t.Errorf("%v: %q, want %q", c.err, got, c.want)
		}
	}
}

// TestGoneFronts: "gone N" lines mark fronts the agents no longer dial.
func TestGoneFronts(t *testing.T) {
	var g goneFronts
	g.follow(strings.NewReader("gone 3\nnoise\ngone 0\ngone 99\ngone x\ngone 2\nback 2\nback x\nhello 4\n"))
	for i, want := range []bool{true, false, false, true, false} {
		if g.has(i) != want {
			t.Errorf("front %d gone %v, want %v", i, g.has(i), want)
		}
	}
}

// TestParseEvent reads a generator line back into its parts.
func TestParseEvent(t *testing.T) {
	ev, ok := parseEvent("F 17 1700000000000000123 503 review_throttled")
	if !ok || ev.kind != "F" || ev.agent != 17 || ev.at.UnixNano() != 1700000000000000123 ||
		fmt.Sprint(ev.fields) != "[503 review_throttled]" {
		t.Errorf("parsed %+v %v", ev, ok)
	}
	if _, ok := parseEvent("U x 12"); ok {
		t.Error("a line with a non-numeric agent parsed")
	}
}

// TestPickVictim: the fullest replica whose agents the others can hold
// under maxSessionsPerReplica, else the one that leaves the survivors
// least full.
func TestPickVictim(t *testing.T) {
	for _, c := range []struct {
		loads []int // sessions of replicas 3, 4, 5
		want  int
	}{
		{[]int{3000, 2000, 1000}, 3},
		{[]int{9000, 100, 5000}, 4},
		{[]int{9300, 9300, 9300}, 3},
	} {
		r := &run{}
		for k, n := range c.loads {
			r.replicas = append(r.replicas, &replica{i: 3 + k})
			for range n {
				r.agents = append(r.agents, &agent{up: true, on: 3 + k})
			}
		}
		r.replicas = append([]*replica{{i: 0, killed: true}}, r.replicas...)
		v, survivors := r.pickVictim()
		if v.i != c.want || len(survivors) != 2 {
			t.Errorf("loads %v: killed %d with %d survivors, want %d with 2", c.loads, v.i, len(survivors), c.want)
		}
	}
}

// TestPhaseSeparatesMovesThatMetACap: a move during which a dial was
// refused 503 at_capacity is left out of the uncapped times; other
// refusals and refusals outside a move do not count.
func TestPhaseSeparatesMovesThatMetACap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := newPhase(t0)
	for _, ev := range cappedEvents(t0) {
		p.onEvent(ev)
	}
	want := []time.Duration{3500 * time.Millisecond, 1200 * time.Millisecond, time.Second}
	if len(p.uncapped) != len(want) {
		t.Fatalf("uncapped moves %v, want %v", p.uncapped, want)
	}
	for i := range want {
		if p.uncapped[i] != want[i] {
			t.Fatalf("uncapped moves %v, want %v", p.uncapped, want)
		}
	}
	if len(p.offRelay) != 4 {
		t.Fatalf("all moves %v, want 4", p.offRelay)
	}
}

// TestPhaseSumsEachAgentsMoves: an agent's time off the relay is the sum
// of its moves (agent 1 moved twice: 3 s, then 1 s).
func TestPhaseSumsEachAgentsMoves(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := newPhase(t0)
	for _, ev := range cappedEvents(t0) {
		p.onEvent(ev)
	}
	want := map[int]time.Duration{1: 4 * time.Second, 2: 3500 * time.Millisecond, 3: 1200 * time.Millisecond}
	if !reflect.DeepEqual(p.perAgent, want) {
		t.Errorf("time off per agent %v, want %v", p.perAgent, want)
	}
}

// cappedEvents: three agents moved, one refused at_capacity, one refused
// review_throttled, one moved twice.
func cappedEvents(t0 time.Time) []event {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	return []event{
		{kind: evFail, agent: 3, at: at(1), fields: []string{"503", "at_capacity"}}, // not off the relay yet
		{kind: evDown, agent: 1, at: at(0)},
		{kind: evDown, agent: 2, at: at(0)},
		{kind: evDown, agent: 3, at: at(0)},
		{kind: evFail, agent: 1, at: at(1000), fields: []string{"503", "at_capacity"}},
		{kind: evFail, agent: 2, at: at(1000), fields: []string{"503", "review_throttled"}},
		{kind: evUp, agent: 1, at: at(3000)},
		{kind: evUp, agent: 2, at: at(3500)},
		{kind: evUp, agent: 3, at: at(1200)},
		{kind: evDown, agent: 1, at: at(4000)}, // moved again: no longer capped
		{kind: evUp, agent: 1, at: at(5000)},
	}
}
