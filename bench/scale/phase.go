package scale

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wirekube/relay-ws/internal/test/procfs"
)

// phase is what the agents went through during one scenario (a rolling
// update, a replica killed), recorded from the generators' events: every
// move (a session that ended, then the agent's next admission) and every
// refused dial, beside the API server's request counts and the machine's
// load over the same interval.
type phase struct {
	start time.Time
	fails map[string]int // refused dials by "[status reason]"
	// offRelay is each move's time off the relay: the end of a session to
	// the agent's next admission (echo back), both after start.
	offRelay []time.Duration
	// uncapped are the moves during which no dial met 503 at_capacity (a
	// bridge at --max-sessions, here the VM's descriptor cap); capped marks
	// the agents off the relay now that met it.
	uncapped []time.Duration
	capped   map[int]bool
	moved    map[int]bool // agents whose session ended during the phase
	// perAgent is each moved agent's time off the relay, its moves summed.
	perAgent map[int]time.Duration
	down     map[int]time.Time

	api0        apiCounts
	overflows0  int64 // procfs.ListenOverflows at start
	cpu0        procfs.CPUTimes
	loadStart   string
	end         time.Time
	api1        apiCounts
	cpu1        procfs.CPUTimes
	loadEnd     string
	pendingDown int // moved agents not back when the phase ended

	// Replicas out of the Service for failing /readyz (--unready-at), at
	// the start: removals so far, their time out.
	full0    int
	fullOut0 time.Duration
}

// PhaseResult is a phase's figures.
type PhaseResult struct {
	Moves, Agents       int // sessions moved; distinct agents moved
	Pending             int // agents not back at the end
	P50, P99, Max       time.Duration
	AgentP50, AgentP99  time.Duration // per moved agent, its moves summed
	AgentMax            time.Duration
	FullRemovals        int           // times a replica left the Service for failing /readyz (--unready-at)
	FullOut             time.Duration // their time out of it, within the phase
	Uncapped            int           // moves that met no at_capacity refusal
	UncappedP50         time.Duration // their time off the relay
	UncappedP99         time.Duration
	Fails               map[string]int
	Refused             int
	TokenReviews        float64 // the API server's tokenreviews requests during the phase
	APIRequests         float64 // all of the API server's requests during the phase
	Duration            time.Duration
	Steal               float64
	LoadStart, LoadEnd  string
	ReviewTime          time.Duration // the moved agents' TokenReviews at the configured rate of the replicas serving them
	LastBack            time.Duration // phase start to the last admission of a moved agent
	ReviewRate          float64       // TokenReviews/s the serving replicas may make (--kube-api-qps each)
	ServingReplicas     int
	DrainRate           float64 // --drain-rate of the drained bridges (0: none drained)
	ListenOverflows     int64   // SYNs the machine dropped at a full accept queue during the phase
	Drains              string  // the rolling update's drains: sessions closed and time each
	SessionsPerReplica0 int     // sessions on the replica drained or killed first
}

// apiCounts are the API server's request counters (its /metrics).
type apiCounts struct{ all, tokenReviews float64 }

// newPhase is a phase recording from start, its maps made.
func newPhase(start time.Time) *phase {
	return &phase{start: start, fails: map[string]int{}, moved: map[int]bool{}, down: map[int]time.Time{}, capped: map[int]bool{},
		perAgent: map[int]time.Duration{}}
}

// beginPhase starts recording a phase (under r.mu).
func (r *run) beginPhase(ctx context.Context) (*phase, error) {
	api, err := r.apiCounts(ctx)
	if err != nil {
		return nil, err
	}
	cpu, err := procfs.MachineCPU()
	if err != nil {
		return nil, err
	}
	overflows, err := procfs.ListenOverflows()
	if err != nil {
		return nil, err
	}
	p := newPhase(time.Now())
	p.api0, p.overflows0, p.cpu0, p.loadStart = api, overflows, cpu, procfs.LoadAverage()
	p.full0, p.fullOut0 = r.ep.full()
	r.mu.Lock()
	r.phase = p
	r.mu.Unlock()
	return p, nil
}

// endPhase stops recording and returns the figures.
func (r *run) endPhase(ctx context.Context, p *phase) (PhaseResult, error) {
	r.mu.Lock()
	r.phase = nil
	p.end = time.Now()
	p.pendingDown = len(p.down)
	r.mu.Unlock()
	var err error
	if p.api1, err = r.apiCounts(ctx); err != nil {
		return PhaseResult{}, err
	}
	if p.cpu1, err = procfs.MachineCPU(); err != nil {
		return PhaseResult{}, err
	}
	p.loadEnd = procfs.LoadAverage()
	overflows, err := procfs.ListenOverflows()
	if err != nil {
		return PhaseResult{}, err
	}
	res := PhaseResult{Moves: len(p.offRelay), Agents: len(p.moved), Pending: p.pendingDown, Fails: p.fails,
		TokenReviews: p.api1.tokenReviews - p.api0.tokenReviews, APIRequests: p.api1.all - p.api0.all,
		ListenOverflows: overflows - p.overflows0, Duration: p.end.Sub(p.start), Steal: procfs.StealShare(p.cpu0, p.cpu1), LoadStart: p.loadStart, LoadEnd: p.loadEnd}
	for _, n := range p.fails {
		res.Refused += n
	}
	removals, out := r.ep.full()
	res.FullRemovals, res.FullOut = removals-p.full0, out-p.fullOut0
	perAgent := make([]time.Duration, 0, len(p.perAgent))
	for _, d := range p.perAgent {
		perAgent = append(perAgent, d)
	}
	res.AgentP50, res.AgentP99, res.AgentMax = spread(perAgent)
	res.P50, res.P99, res.Max = spread(p.offRelay)
	res.Uncapped = len(p.uncapped)
	res.UncappedP50, res.UncappedP99, _ = spread(p.uncapped)
	return res, nil
}

// spread returns the p50, p99 and largest of s (zero when s is empty),
// leaving s as it is.
func spread(s []time.Duration) (p50, p99, largest time.Duration) {
	if len(s) == 0 {
		return 0, 0, 0
	}
	s = slices.Sorted(slices.Values(s))
	return quantile(s, 0.50), quantile(s, 0.99), s[len(s)-1]
}

// quantile of sorted s by the nearest-rank method.
func quantile(s []time.Duration, q float64) time.Duration {
	k := int(q*float64(len(s)) + 0.999999999)
	return s[min(max(k, 1), len(s))-1]
}

// onPhaseEvent records ev in the phase (under r.mu).
func (p *phase) onEvent(ev event) {
	if ev.at.Before(p.start) {
		return
	}
	switch ev.kind {
	case evDown:
		p.moved[ev.agent] = true
		p.down[ev.agent] = ev.at
	case evUp:
		if at, ok := p.down[ev.agent]; ok {
			p.offRelay = append(p.offRelay, ev.at.Sub(at))
			p.perAgent[ev.agent] += ev.at.Sub(at)
			if !p.capped[ev.agent] {
				p.uncapped = append(p.uncapped, ev.at.Sub(at))
			}
			delete(p.down, ev.agent)
			delete(p.capped, ev.agent)
		}
	case evFail:
		p.fails[fmt.Sprint(ev.fields)]++
		if _, ok := p.down[ev.agent]; ok && len(ev.fields) == 2 && ev.fields[1] == "at_capacity" {
			p.capped[ev.agent] = true
		}
	}
}

// lastBack is the phase's last admission of a moved agent, since start.
func (p *phase) lastBackLocked(agents []*agent) time.Duration {
	var last time.Duration
	for i := range p.moved {
		if a := agents[i]; a.up && a.upAt.After(p.start) {
			last = max(last, a.upAt.Sub(p.start))
		}
	}
	return last
}

// apiCounts reads apiserver_request_total from the API server's /metrics:
// every request, and those on tokenreviews.
func (r *run) apiCounts(ctx context.Context) (apiCounts, error) {
	b, err := r.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiCounts{}, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	return parseAPICounts(b), nil
}

func parseAPICounts(b []byte) apiCounts {
	var c apiCounts
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		c.all += v
		if strings.Contains(line, `resource="tokenreviews"`) {
			c.tokenReviews += v
		}
	}
	return c
}
