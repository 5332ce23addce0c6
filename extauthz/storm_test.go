package extauthz

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/status"
	authnv1 "k8s.io/api/authentication/v1"

	"github.com/wirekube/relay-ws/internal/contract"
)

// EnvStormDuration sets the forged-token storm of BenchmarkAttackStorm per
// scenario (a Go duration, at most 60s). Default 20s.
const EnvStormDuration = "WIREKUBE_STORM_DURATION"

const (
	stormAgents  = 500
	stormWorkers = 64                   // forged-token senders, closed loop
	stormAPIWait = 5 * time.Millisecond // the fake TokenReview's latency
)

func stormDuration(b *testing.B) time.Duration {
	d := 20 * time.Second
	if v := os.Getenv(EnvStormDuration); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 || d > time.Minute {
			b.Fatalf("%s=%q: want a duration in (0, 60s]", EnvStormDuration, v)
		}
	}
	return d
}

// stormScenario is one run: the API up or down, the extauthz mode and the
// attacker's tokens.
type stormScenario struct {
	name    string
	apiDown bool
	mode    string
	attack  attackKind
}

// attackKind is what the storm's senders send.
type attackKind int

const (
	attackNone     attackKind = iota // the baseline, legitimate agents only
	attackForged                     // tokens no cluster key signed
	attackStranger                   // signed tokens of a ServiceAccount no rule admits
	attackFlood                      // signed tokens of one admitted agent identity
)

// stormResult is what a scenario prints.
type stormResult struct {
	attackSent    int64
	attackByCode  map[string]int64
	attackReviews int64 // TokenReviews spent on the attacker's tokens
	jwksFetches   int64
	admitted      int
	refusedByCode map[string]int
	p50, p99      time.Duration
}

// BenchmarkAttackStorm is the forged-token attack: distinct forged tokens from
// stormWorkers closed-loop senders over gRPC on loopback for the storm
// duration, while stormAgents legitimate agents with fresh, never-cached
// tokens (each bound to its own Pod) connect at once one second in and
// retry 503 answers with the real agent's backoff (1, 2, 4 ... 30 s) until
// the storm ends. It runs a baseline without an attack, the forged storm
// with the API up, and with the API down under each --on-review-unavailable
// setting; then the stranger storms with the API up: validly signed tokens of
// a ServiceAccount no rule admits (anyone with create serviceaccounts/token
// in some namespace mints them), and distinct valid tokens of one agent
// identity (a node minting tokens for its own agent Pod). The fake
// TokenReview takes stormAPIWait (up) or fails at once (down, a refused
// connection). Fixed workload; b.N is not used.
func BenchmarkAttackStorm(b *testing.B) {
	d := stormDuration(b)
	fmt.Printf("attack storm: %d forged-token senders for %s per scenario, %d fresh agents connecting at 1s; defaults --kube-api-qps=50 --kube-api-burst=100 --max-inflight-reviews=16 --max-review-wait=500ms\n",
		stormWorkers, d, stormAgents)
	for _, sc := range []stormScenario{
		{name: "baseline (no storm), API up", mode: UnavailableDeny},
		{name: "storm, API up", mode: UnavailableDeny, attack: attackForged},
		{name: "storm, API down, deny", apiDown: true, mode: UnavailableDeny, attack: attackForged},
		{name: "storm, API down, verify-offline", apiDown: true, mode: UnavailableVerifyOffline, attack: attackForged},
		{name: "stranger storm, API up", mode: UnavailableDeny, attack: attackStranger},
		{name: "one agent identity flooding, API up", mode: UnavailableDeny, attack: attackFlood},
	} {
		r := runStorm(b, sc, d)
		printStorm(sc, r, d)
		if r.attackReviews != 0 && sc.attack != attackFlood {
			b.Errorf("%s: %d TokenReviews for the attacker's tokens, want 0", sc.name, r.attackReviews)
		}
	}
}

func runStorm(b *testing.B, sc stormScenario, d time.Duration) stormResult {
	e := benchEnv(b, func(o *Options) { o.OnReviewUnavailable = sc.mode })
	c := serveLoopback(b, e.srv)
	var legitReviews atomic.Int64
	api := func(string) (authnv1.TokenReviewStatus, error) {
		legitReviews.Add(1)
		if sc.apiDown {
			return authnv1.TokenReviewStatus{}, errFakeAPI
		}
		time.Sleep(stormAPIWait)
		return podBound(), nil
	}
	stormPods(b, e, stormAgents)
	agents := make([]string, stormAgents)
	for i := range agents {
		s := agentSpec(e).withClock(time.Now())
		s.pod = &ref{fmt.Sprintf("agent-%d", i), fmt.Sprintf("uid-agent-%d", i)}
		agents[i] = e.answerToken(s.sign(), api)
	}
	attack := attackTokens(e, sc.attack)
	fetches := e.disc.fetches.Load()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var r stormResult
	var wg sync.WaitGroup
	if sc.attack != attackNone {
		wg.Go(func() { r.attackSent, r.attackByCode = flood(ctx, c, attack) })
	}
	lat, refused := connectAgents(ctx, c, agents)
	wg.Wait()
	r.attackReviews = e.reviews.Load() - legitReviews.Load()
	r.jwksFetches = e.disc.fetches.Load() - fetches
	r.admitted, r.refusedByCode = len(lat), refused
	if len(lat) > 0 {
		slices.Sort(lat)
		r.p50, r.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return r
}

// withClock moves the token's validity to the wall clock: the storm runs on
// real time, not the env's fixed test clock.
func (s tokenSpec) withClock(now time.Time) tokenSpec {
	s.exp = now.Add(time.Hour)
	return s
}

// flood sends the attacker's tokens (next(i) is the i-th of a sender) from
// stormWorkers loops until ctx ends.
func flood(ctx context.Context, c authv3.AuthorizationClient, next func(i int) string) (int64, map[string]int64) {
	var mu sync.Mutex
	codes := map[string]int64{}
	var sent atomic.Int64
	var wg sync.WaitGroup
	for w := range stormWorkers {
		wg.Go(func() {
			local := map[string]int64{}
			for i := 0; !over(ctx); i++ {
				resp, err := c.Check(ctx, relayCheck(next(w+i), nil))
				if over(ctx) {
					break
				}
				sent.Add(1)
				local[answerCode(resp, err)]++
			}
			mu.Lock()
			for k, v := range local {
				codes[k] += v
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return sent.Load(), codes
}

// over reports whether ctx's deadline passed. gRPC fails a call at the
// deadline by its own clock, possibly before ctx's timer marks ctx done: a
// check of ctx.Err() alone would count those failures as answers.
func over(ctx context.Context) bool {
	dl, _ := ctx.Deadline()
	return ctx.Err() != nil || !time.Now().Before(dl)
}

// forgedVariant is the i-th forged token: distinct each time, a third with a
// random kid, a third with the cluster's real kid (so each costs a
// signature verification), a third without kid.
func forgedVariant(i int) string {
	tok := forgeExpOnly(time.Now().Add(time.Hour))
	if i%3 == 0 {
		return tok
	}
	hdr := `{"alg":"RS256","typ":"JWT","kid":"test"}`
	if i%3 == 1 {
		hdr = `{"alg":"RS256","typ":"JWT"}`
	}
	_, rest, _ := strings.Cut(tok, ".")
	forged := b64.EncodeToString([]byte(hdr)) + "." + rest
	suiteTokens.Store(forged, true)
	return forged
}

func answerCode(resp *authv3.CheckResponse, err error) string {
	if err != nil {
		return "grpc " + status.Code(err).String()
	}
	if resp.GetOkResponse() != nil {
		return "allowed"
	}
	for _, h := range resp.GetDeniedResponse().GetHeaders() {
		if h.GetHeader().GetKey() == contract.HeaderDenyReason {
			return fmt.Sprintf("%d %s", resp.GetDeniedResponse().GetStatus().GetCode(), h.GetHeader().GetValue())
		}
	}
	return "denied"
}

// connectAgents connects every agent at 1s, retrying retryable denials with
// the real agent's backoff until ctx ends, and returns the connect latency
// (first attempt to allow) of the admitted ones and the last answer of the
// others.
func connectAgents(ctx context.Context, c authv3.AuthorizationClient, agents []string) ([]time.Duration, map[string]int) {
	t := time.NewTimer(time.Second)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	var mu sync.Mutex
	var lat []time.Duration
	refused := map[string]int{}
	var wg sync.WaitGroup
	for _, tok := range agents {
		wg.Go(func() {
			l, last := connectAgent(ctx, c, tok)
			mu.Lock()
			defer mu.Unlock()
			if last == "allowed" {
				lat = append(lat, l)
				return
			}
			refused[last]++
		})
	}
	wg.Wait()
	return lat, refused
}

func connectAgent(ctx context.Context, c authv3.AuthorizationClient, tok string) (time.Duration, string) {
	start := time.Now()
	wait := time.Second
	last := "not tried"
	for !over(ctx) {
		resp, err := c.Check(ctx, relayCheck(tok, nil))
		if over(ctx) {
			break
		}
		if last = answerCode(resp, err); last == "allowed" || !strings.HasPrefix(last, "503 ") {
			return time.Since(start), last
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		wait = min(2*wait, 30*time.Second)
	}
	return 0, last
}

func printStorm(sc stormScenario, r stormResult, d time.Duration) {
	fmt.Printf("  %s:\n", sc.name)
	if sc.attack != attackNone {
		goal := "goal 0"
		if sc.attack == attackFlood {
			goal = "its share of the gate"
		}
		fmt.Printf("    %s: %d sent (%.0f/s), answers %v, TokenReviews for them %d (%s), JWKS fetches %d\n",
			attackNames[sc.attack], r.attackSent, float64(r.attackSent)/d.Seconds(), fmtCounts(r.attackByCode),
			r.attackReviews, goal, r.jwksFetches)
	}
	fmt.Printf("    legitimate agents admitted %d/%d, connect p50 %s p99 %s; not admitted by the end: %v\n",
		r.admitted, stormAgents, r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.refusedByCode)
}

func fmtCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "[%s: %d] ", k, m[k])
	}
	return strings.TrimSpace(sb.String())
}
