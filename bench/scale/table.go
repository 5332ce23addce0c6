package scale

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wirekube/relay-ws/bridge"
	"github.com/wirekube/relay-ws/internal/test/benchrow"
)

// Result is one run's figures.
type Result struct {
	Config      Config
	Generators  int
	ConnectTime time.Duration
	Sessions    map[int]int // live sessions per replica at rest

	Before, Rest map[string]int64 // VmRSS per process before the agents and at rest
	// RuntimeBefore and RuntimeRest are runtimeMetrics per bridge and
	// extauthz process, before the agents and at rest.
	RuntimeBefore, RuntimeRest map[string]map[string]float64
	RestCPU                    map[string]float64 // CPU cores per process at rest
	Procs                      []procRow

	Burst struct {
		Deleted, Closed, OthersClosed int
		DeleteTook                    time.Duration // first delete sent to last delete answered
		LastClose                     time.Duration // last delete answered to last revoked session closed
		LastCloseFromFirst            time.Duration // first delete sent to last close
	}
	Kill struct {
		Agents, Readmitted int
		TimedOut           bool
		Stalled            bool          // no admission for the last 45 s before the wait ended
		LastAdmission      time.Duration // SIGKILL to the last re-admission
		TokenReviews       int           // on the surviving extauthz replicas
		Peak               map[string]int64
		Fails              map[string]int // refused dials after the kill, by "[status reason]"
		Phase              PhaseResult    // the agents' moves, from the kill until the last was back
	}
	Roll PhaseResult // the rolling update of every replica

	Steal              float64
	Elapsed            time.Duration
	LoadStart, LoadEnd string
}

// perSession is the resident memory a process of role added per live
// session on its replica, averaged over the replicas (KiB).
func (r *Result) perSession(role string) (float64, bool) {
	var sum float64
	n := 0
	for _, p := range r.Procs {
		if p.role != role || p.replica < 0 || r.Sessions[p.replica] == 0 {
			continue
		}
		sum += float64(r.Rest[p.name]-r.Before[p.name]) / float64(r.Sessions[p.replica]) / 1024
		n++
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// runtimeText is the growth of the Go runtime figures of role's processes
// per live session on their replica, averaged over the replicas.
func (r *Result) runtimeText(role string) string {
	var g, stack, heap float64
	n := 0
	for _, p := range r.Procs {
		b, a := r.RuntimeBefore[p.name], r.RuntimeRest[p.name]
		if p.role != role || b == nil || a == nil || r.Sessions[p.replica] == 0 {
			continue
		}
		s := float64(r.Sessions[p.replica])
		g += (a["go_goroutines"] - b["go_goroutines"]) / s
		stack += (a["go_memstats_stack_inuse_bytes"] - b["go_memstats_stack_inuse_bytes"]) / s / 1024
		heap += (a["go_memstats_heap_inuse_bytes"] - b["go_memstats_heap_inuse_bytes"]) / s / 1024
		n++
	}
	if n == 0 {
		return "n/a"
	}
	k := float64(n)
	return fmt.Sprintf("%.2f goroutines, stack %.1f KiB, heap %.1f KiB", g/k, stack/k, heap/k)
}

// Rows are the figures as benchrow rows.
func (r *Result) Rows() []benchrow.Row {
	kib := func(role string) string {
		v, ok := r.perSession(role)
		if !ok {
			return "n/a"
		}
		return fmt.Sprintf("%.1f KiB", v)
	}
	br, _ := r.perSession("bridge")
	ea, _ := r.perSession("extauthz")
	ng, _ := r.perSession("nginx")
	b, k := r.Burst, r.Kill
	rows := []benchrow.Row{
		{Figure: "scale: bridge RSS / live session, revocation stream on", Value: kib("bridge"),
			Baseline: "-", Ratio: "-", Goal: "<= 12 KiB", Met: yesNo(br > 0 && br <= 12)},
		{Figure: "scale: bridge per live session: goroutines, stack, heap in use", Value: r.runtimeText("bridge"),
			Baseline: "bridge RSS " + kib("bridge"), Ratio: "-", Goal: "-", Met: "-"},
		{Figure: "scale: extauthz per live binding: goroutines, stack, heap in use", Value: r.runtimeText("extauthz"),
			Baseline: "extauthz RSS " + kib("extauthz"), Ratio: "-", Goal: "-", Met: "-"},
		{Figure: "scale: extauthz RSS / live binding", Value: kib("extauthz"), Baseline: "bridge " + kib("bridge"),
			Ratio: ratio(ea, br), Goal: "-", Met: "-"},
		{Figure: "scale: nginx RSS / live session", Value: kib("nginx"), Baseline: "bridge " + kib("bridge"),
			Ratio: ratio(ng, br), Goal: "-", Met: "-"},
		{Figure: "scale: live registered sessions, replicas", Value: fmt.Sprintf("%d on %d", r.Config.Agents, r.Config.Replicas),
			Baseline: "goal 25,000 on 3", Ratio: fmt.Sprintf("%.2f", float64(r.Config.Agents)/25000), Goal: "25,000", Met: yesNo(r.Config.Agents >= 25000)},
		{Figure: "scale: Pod burst, sessions closed (exactly those)", Value: fmt.Sprintf("%d of %d, %d others", b.Closed, b.Deleted, b.OthersClosed),
			Baseline: fmt.Sprintf("%d deleted", b.Deleted), Ratio: ratio(float64(b.Closed), float64(b.Deleted)), Goal: "all, 0 others",
			Met: yesNo(b.Closed == b.Deleted && b.OthersClosed == 0)},
		{Figure: "scale: Pod burst, last close after the last delete", Value: round(b.LastClose).String(),
			Baseline: fmt.Sprintf("deletes took %s", round(b.DeleteTook)), Ratio: "-", Goal: "<= 1s", Met: yesNo(b.Closed > 0 && b.LastClose <= time.Second)},
		{Figure: "scale: replica SIGKILLed, agents re-admitted", Value: fmt.Sprintf("%d of %d%s", k.Readmitted, k.Agents, stalledText(k.Stalled)),
			Baseline: fmt.Sprintf("%d on the replica", k.Agents), Ratio: ratio(float64(k.Readmitted), float64(k.Agents)), Goal: "all",
			Met: yesNo(k.Agents > 0 && k.Readmitted == k.Agents)},
		{Figure: "scale: replica SIGKILLed, time to the last re-admission", Value: round(k.LastAdmission).String(),
			Baseline: "agent backoff 1,2,4..30 s", Ratio: "-", Goal: "-", Met: "-"},
		{Figure: "scale: replica SIGKILLed, TokenReviews spent", Value: fmt.Sprint(k.TokenReviews),
			Baseline: fmt.Sprintf("%d agents moved", k.Agents), Ratio: ratio(float64(k.TokenReviews), float64(k.Agents)), Goal: "<= 1.0x",
			Met: yesNo(k.Agents > 0 && k.TokenReviews <= k.Agents)},
	}
	rows = append(rows, r.phaseRows(r.Roll, false)...)
	rows = append(rows, r.phaseRows(r.Kill.Phase, true)...)
	for _, role := range []string{"nginx", "extauthz", "bridge", "relay", "generator", "kube-apiserver", "etcd"} {
		rows = append(rows, r.processRow(role))
	}
	return rows
}

// processFigure names the at-rest row of each role (a literal per figure:
// the docs/performance.md test finds the figures by their literals).
func processFigure(role string) string {
	switch role {
	case "nginx":
		return "scale: at rest, per nginx process (RSS, CPU, failover peak)"
	case "extauthz":
		return "scale: at rest, per extauthz process (RSS, CPU, failover peak)"
	case "bridge":
		return "scale: at rest, per bridge process (RSS, CPU, failover peak)"
	case "relay":
		return "scale: at rest, per reference relay process (RSS, CPU, failover peak)"
	case "generator":
		return "scale: at rest, per load generator process (RSS, CPU, failover peak)"
	case "kube-apiserver":
		return "scale: at rest, kube-apiserver (RSS, CPU, failover peak)"
	default:
		return "scale: at rest, etcd (RSS, CPU, failover peak)"
	}
}

// processRow averages role's processes: RSS and CPU at rest, the highest
// peak during the failover (survivors only), against the RSS before the
// agents connected.
func (r *Result) processRow(role string) benchrow.Row {
	var before, rest int64
	var cpu float64
	var peak int64
	n := 0
	for _, p := range r.Procs {
		if p.role != role {
			continue
		}
		n++
		before += r.Before[p.name]
		rest += r.Rest[p.name]
		cpu += r.RestCPU[p.name]
	}
	for name, v := range r.Kill.Peak { // the survivors of the kill, whichever replicas they are
		if strings.HasPrefix(name, role) && (len(name) == len(role) || name[len(role)] == '-') {
			peak = max(peak, v)
		}
	}
	row := benchrow.Row{Figure: processFigure(role), Goal: "-", Met: "-"}
	if n == 0 {
		row.Value, row.Baseline, row.Ratio = "n/a", "-", "-"
		return row
	}
	k := int64(n)
	row.Value = fmt.Sprintf("%s, %.1f %% of a core, peak %s (%d)", mib(rest/k), 100*cpu/float64(n), mib(peak), n)
	row.Baseline = "before the agents " + mib(before/k)
	row.Ratio = ratio(float64(rest), float64(before))
	return row
}

// Print writes the report: one table of the figures, then per process its
// memory and CPU, and the marked rows for bench/cmd/benchtable.
func (r *Result) Print(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "scale benchmark: real kube-apiserver + etcd; %d replicas (nginx TLS front with the shipped config, extauthz, bridge on "+
		"its extauthz's revocation stream, each a process; a reference relay per replica); %d agents with Pod-bound tokens from %d generator "+
		"processes (real agent backoff, keepalives every 25 s); extauthz --on-review-throttled=%s, bridge --drain-rate=%.0f; "+
		"run took %s; steal %.1f %%; load average %s at the start, %s at the end\n",
		c.Replicas, c.Agents, r.Generators, c.OnReviewThrottled, c.DrainRate, r.Elapsed.Round(time.Second), 100*r.Steal, r.LoadStart, r.LoadEnd)
	fmt.Fprintf(w, "  connect: all %d admitted %s after the first generator started (ramp %.0f agents/s); sessions per replica at rest %v\n",
		c.Agents, r.ConnectTime.Round(time.Second), c.Rate, r.Sessions)
	benchrow.Table(w, r.Rows())
	fmt.Fprintf(w, "per process (RSS before the agents -> at rest, CPU at rest over %s, peak RSS during the failover):\n", c.RestWindow)
	for _, p := range r.Procs {
		peak := "killed"
		if v, ok := r.Kill.Peak[p.name]; ok {
			peak = mib(v)
		}
		fmt.Fprintf(w, "  %-16s %9s -> %9s  CPU %5.1f %% of a core  peak %s\n", p.name, mib(r.Before[p.name]), mib(r.Rest[p.name]),
			100*r.RestCPU[p.name], peak)
	}
	if len(r.Kill.Fails) > 0 {
		var parts []string
		for _, k := range sortedKeys(r.Kill.Fails) {
			parts = append(parts, fmt.Sprintf("%s x%d", k, r.Kill.Fails[k]))
		}
		fmt.Fprintf(w, "  refused dials after the kill ([HTTP status, reason]): %s\n", strings.Join(parts, ", "))
	}
	benchrow.Print(w, r.Rows()...)
}

func stalledText(stalled bool) string {
	if stalled {
		return " (then none for 45 s: survivors full)"
	}
	return ""
}

func mib(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

// Figures of the two scenarios, by kind (literals: the docs/performance.md
// test finds the figures by their literals).
type phaseFigures struct{ offRelay, perAgent, uncapped, full, refused, reviews, api, last string }

var (
	rollFigures = phaseFigures{
		offRelay: "scale: rolling update, time off the relay per move (p50, p99, max)",
		perAgent: "scale: rolling update, time off the relay per agent, its moves summed (p50, p99, max)",
		full:     "scale: rolling update, replicas out of the Service at --unready-at (readiness)",
		uncapped: "scale: rolling update, time off the relay per move that met no at_capacity (p50, p99)",
		refused:  "scale: rolling update, refused dials per move",
		reviews:  "scale: rolling update, TokenReviews per move (kube-apiserver's count)",
		api:      "scale: rolling update, kube-apiserver requests/s",
		last:     "scale: rolling update, drain pace",
	}
	killFigures = phaseFigures{
		offRelay: "scale: replica SIGKILLed, time off the relay per move (p50, p99, max)",
		full:     "scale: replica SIGKILLed, replicas out of the Service at --unready-at (readiness)",
		uncapped: "scale: replica SIGKILLed, time off the relay per move that met no at_capacity (p50, p99)",
		refused:  "scale: replica SIGKILLed, refused dials per moved agent",
		reviews:  "scale: replica SIGKILLed, TokenReviews per moved agent (kube-apiserver's count)",
		api:      "scale: replica SIGKILLed, kube-apiserver requests/s",
		last:     "scale: replica SIGKILLed, last moved agent back vs its TokenReviews at the configured rate",
	}
)

// phaseRows are a scenario's figures beside their goals; every
// value names the run's size and mode and the load and steal over the
// scenario.
func (r *Result) phaseRows(p PhaseResult, kill bool) []benchrow.Row {
	f := rollFigures
	if kill {
		f = killFigures
	}
	ctxt := fmt.Sprintf("%d agents, --on-review-throttled=%s; load %s -> %s, steal %.1f %%, %d SYNs dropped at full accept queues",
		r.Config.Agents, r.Config.OnReviewThrottled, p.LoadStart, p.LoadEnd, 100*p.Steal, p.ListenOverflows)
	off := benchrow.Row{Figure: f.offRelay,
		Value:    fmt.Sprintf("%s, %s, %s over %d moves of %d agents (%s)", round(p.P50), round(p.P99), round(p.Max), p.Moves, p.Agents, ctxt),
		Baseline: "agent's first retry 1 s", Ratio: ratio(p.P99.Seconds(), 1), Goal: "-", Met: "-"}
	if !kill {
		off.Goal, off.Met = "p99 < 5s", yesNo(p.Moves > 0 && p.Pending == 0 && p.P99 < 5*time.Second)
	}
	hi, lo, _ := bridge.FullMarks(maxSessionsPerReplica, r.Config.UnreadyAt)
	full := benchrow.Row{Figure: f.full, Value: fmt.Sprintf("%d times, %s out in all", p.FullRemovals, p.FullOut.Round(time.Second)),
		Baseline: fmt.Sprintf("--unready-at=%d of --max-sessions=%d: full from %d sessions, clear at %d; /readyz is not affected, so only ill health takes a replica out", r.Config.UnreadyAt,
			maxSessionsPerReplica, hi, lo), Ratio: "-", Goal: "-", Met: "-"}
	uncapped := benchrow.Row{Figure: f.uncapped,
		Value:    fmt.Sprintf("%s, %s over %d of %d moves", round(p.UncappedP50), round(p.UncappedP99), p.Uncapped, p.Moves),
		Baseline: fmt.Sprintf("all moves' p99 %s; the others met a bridge at --max-sessions=%d (this VM's descriptor cap)", round(p.P99), maxSessionsPerReplica),
		Ratio:    ratio(p.UncappedP99.Seconds(), 1), Goal: "-", Met: "-"}
	// A rolling update moves an agent once per replica it lands on before
	// that one is drained too: its costs are per move. A kill moves each
	// agent once.
	moved := p.Moves
	if kill {
		moved = p.Agents
	}
	per := func(v float64) string { return ratio(v, float64(moved)) }
	refused := benchrow.Row{Figure: f.refused, Value: fmt.Sprintf("%d (%s)", p.Refused, failsText(p.Fails)),
		Baseline: fmt.Sprintf("%d moves of %d agents", p.Moves, p.Agents), Ratio: per(float64(p.Refused)), Goal: "< 1",
		Met: yesNo(moved > 0 && p.Refused < moved)}
	reviews := benchrow.Row{Figure: f.reviews, Value: fmt.Sprintf("%.0f", p.TokenReviews),
		Baseline: fmt.Sprintf("%d moves of %d agents", p.Moves, p.Agents), Ratio: per(p.TokenReviews), Goal: "<= 1.0",
		Met: yesNo(moved > 0 && p.TokenReviews <= float64(moved))}
	api := benchrow.Row{Figure: f.api, Value: fmt.Sprintf("%.1f/s over %s", p.APIRequests/p.Duration.Seconds(), round(p.Duration)),
		Baseline: fmt.Sprintf("TokenReviews %.1f/s", p.TokenReviews/p.Duration.Seconds()), Ratio: "-", Goal: "-", Met: "-"}
	if !kill {
		agent := benchrow.Row{Figure: f.perAgent,
			Value:    fmt.Sprintf("%s, %s, %s over %d agents", round(p.AgentP50), round(p.AgentP99), round(p.AgentMax), p.Agents),
			Baseline: "agent's first retry 1 s", Ratio: ratio(p.AgentP99.Seconds(), 1), Goal: "p99 < 5s",
			Met: yesNo(p.Agents > 0 && p.Pending == 0 && p.AgentP99 < 5*time.Second)}
		return []benchrow.Row{off, agent, uncapped, full, refused, reviews, api, {Figure: f.last,
			Value:    fmt.Sprintf("--drain-rate %.0f/s; drains of %s", p.DrainRate, p.Drains),
			Baseline: fmt.Sprintf("TokenReview rate of the %d serving replicas %.0f/s", p.ServingReplicas, p.ReviewRate),
			Ratio:    ratio(p.DrainRate, p.ReviewRate), Goal: "-", Met: "-"}}
	}
	need := time.Duration(float64(p.SessionsPerReplica0) / p.ReviewRate * float64(time.Second))
	return []benchrow.Row{off, uncapped, full, refused, reviews, api, {Figure: f.last, Value: fmt.Sprintf("%s (%s)", round(p.LastBack), ctxt),
		Baseline: fmt.Sprintf("%s: %d agents at %.0f/s (%d survivors)", round(need), p.SessionsPerReplica0, p.ReviewRate, p.ServingReplicas),
		Ratio:    ratio(p.LastBack.Seconds(), need.Seconds()), Goal: "<= 1.2x",
		Met: yesNo(need > 0 && p.Pending == 0 && p.LastBack.Seconds() <= 1.2*need.Seconds())}}
}

func failsText(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s x%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
