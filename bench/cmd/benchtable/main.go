// Command benchtable turns the output of one `make bench` run into the one
// table of docs/performance.md: every row a benchmark printed
// (internal/test/benchrow lines), the rows of the benchmarks that report
// their figures as `go test -bench` metrics (the extauthz and recovery
// ones), and the run's steal time and load average (from the /proc/stat
// and /proc/loadavg lines `make bench` saved when it started).
//
//	go test -run '^$' -bench . ./... | tee bench.out
//	benchtable -start bench.start -doc docs/performance.md < bench.out
//
// With -doc it also writes the table into that Markdown file, in place of
// the lines between its benchtable:begin and benchtable:end markers; the
// rest of the file (the hand-written text around the table) is kept.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wirekube/relay-ws/internal/test/benchrow"
)

func main() {
	start := flag.String("start", "", "file with the /proc/stat cpu line and /proc/loadavg as the run started")
	doc := flag.String("doc", "", "Markdown file whose table between the benchtable:begin and benchtable:end lines is replaced")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *start, *doc); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

// run prints the table of the bench output read from in, and writes it
// into docPath when that is set.
func run(in io.Reader, out io.Writer, startFile, docPath string) error {
	b, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	rows, err := runRows(b, startFile)
	if err != nil {
		return err
	}
	printTable(out, rows)
	if docPath == "" {
		return nil
	}
	return writeDoc(docPath, rows)
}

func report(w io.Writer, out []byte, startFile string) error {
	rows, err := runRows(out, startFile)
	if err != nil {
		return err
	}
	printTable(w, rows)
	return nil
}

func printTable(w io.Writer, rows []benchrow.Row) {
	fmt.Fprintf(w, "make bench, %s UTC\n\n", time.Now().UTC().Format("2006-01-02 15:04"))
	benchrow.Table(w, rows)
}

// runRows are the rows of the table: the marked rows and metric rows of
// out, then the run's steal time and load average.
func runRows(out []byte, startFile string) ([]benchrow.Row, error) {
	rows, err := benchrow.Collect(bytes.NewReader(out))
	if err != nil {
		return nil, err
	}
	rows = append(metricRows(parseMetrics(out)), rows...)
	steal, load, err := stealAndLoad(startFile)
	if err != nil {
		return nil, err
	}
	return append(rows, benchrow.Row{Figure: "steal time during the whole make bench run", Value: steal,
		Baseline: "load average " + load, Ratio: "-", Goal: "-", Met: "-"}), nil
}

// stealAndLoad are the steal time since the run started and the load
// average then and now, from startFile ("-" each without one).
func stealAndLoad(startFile string) (steal, load string, err error) {
	if startFile == "" {
		return "-", "-", nil
	}
	b, err := os.ReadFile(startFile)
	if err != nil {
		return "", "", err
	}
	now, err := os.ReadFile("/proc/stat")
	if err != nil {
		return "", "", err
	}
	first, rest, _ := strings.Cut(string(b), "\n")
	s, err := stealBetween(first, firstLine(string(now)))
	if err != nil {
		return "", "", err
	}
	steal, load = fmt.Sprintf("%.1f %%", 100*s), "-"
	if f := strings.Fields(rest); len(f) > 0 {
		load = f[0]
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load += " -> " + strings.Fields(string(b))[0]
	}
	return steal, load, nil
}

// metrics are the `go test -bench` result lines: benchmark name (without
// the -N suffix) -> unit -> value.
type metrics map[string]map[string]float64

func parseMetrics(out []byte) metrics {
	m := metrics{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name, _, _ := strings.Cut(f[0], "-")
		units := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				units[f[i+1]] = v
			}
		}
		m[name] = units
	}
	return m
}

func (m metrics) get(bench, unit string) (float64, bool) {
	v, ok := m[bench][unit]
	return v, ok
}

// metricRows are the rows of the benchmarks that report figures as
// metrics. A benchmark that did not run gives its rows "not measured".
func metricRows(m metrics) []benchrow.Row {
	na := func(r benchrow.Row) benchrow.Row {
		r.Value, r.Baseline, r.Ratio, r.Met = "n/a", "-", "-", "not measured"
		return r
	}
	var rows []benchrow.Row

	// The goal holds with the identity headers authenticated (an in-Pod
	// MAC since a per-start key is one; docs/revocation.md#signing-cost).
	hit := benchrow.Row{Figure: "extauthz Check, cache hit, in process", Goal: "<= 12 us, <= 60 allocs"}
	if ns, ok := m.get("BenchmarkCheckCacheHit", "ns/op"); ok {
		allocs, _ := m.get("BenchmarkCheckCacheHit", "allocs/op")
		hit.Value = fmt.Sprintf("%.1f us, %.0f allocs", ns/1e3, allocs)
		hit.Baseline, hit.Ratio = "goal 12 us", fmt.Sprintf("%.2f", ns/12e3)
		hit.Met = yesNo(ns <= 12e3 && allocs <= 60)
	} else {
		hit = na(hit)
	}
	rows = append(rows, hit)

	grpc := benchrow.Row{Figure: "extauthz checks/s over gRPC vs a no-op Check server", Goal: ">= 0.7x"}
	paced := benchrow.Row{Figure: "extauthz p99 paced at 5,000 checks/s", Goal: "< 3 ms"}
	if ours, ok := m.get("BenchmarkGRPCLoopback", "checks/s"); ok {
		noop, _ := m.get("BenchmarkGRPCLoopback", "noop-checks/s")
		grpc.Value, grpc.Baseline = fmt.Sprintf("%.0f /s", ours), fmt.Sprintf("no-op %.0f /s", noop)
		grpc.Ratio, grpc.Met = ratio(ours, noop), yesNo(noop > 0 && ours/noop >= 0.7)
		p99, _ := m.get("BenchmarkGRPCLoopback", "p99-us@5k/s")
		np99, _ := m.get("BenchmarkGRPCLoopback", "noop-p99-us@5k/s")
		paced.Value, paced.Baseline = fmt.Sprintf("%.1f ms", p99/1e3), fmt.Sprintf("no-op %.1f ms", np99/1e3)
		paced.Ratio, paced.Met = ratio(p99, np99), yesNo(p99 < 3000)
	} else {
		grpc, paced = na(grpc), na(paced)
	}
	rows = append(rows, grpc, paced)

	rtt := benchrow.Row{Figure: "added p50 round trip through the bridge, 64-byte frames (BenchmarkRoundTrip)", Goal: "< 50 us"}
	if us, ok := m.get("BenchmarkRoundTrip", "bridge_(ws)_added_p50_us"); ok {
		naive, _ := m.get("BenchmarkRoundTrip", "naive_gateway_(ws)_added_p50_us")
		rtt.Value, rtt.Baseline = fmt.Sprintf("+%.0f us", us), fmt.Sprintf("naive gateway +%.0f us", naive)
		rtt.Ratio, rtt.Met = ratio(us, naive), yesNo(us < 50)
	} else {
		rtt = na(rtt)
	}
	// The floor: a plain TCP forwarder (io.Copy each way) in its own
	// process, what one more process per hop costs on this machine.
	floor := benchrow.Row{Figure: "added p50 round trip through a plain Go TCP forwarder, the floor of a process hop (BenchmarkRoundTrip)",
		Goal: "-", Met: "-"}
	if f, ok := m.get("BenchmarkRoundTrip", "Go_TCP_forwarder_(floor)_added_p50_us"); ok {
		us, _ := m.get("BenchmarkRoundTrip", "bridge_(ws)_added_p50_us")
		floor.Value, floor.Baseline, floor.Ratio = fmt.Sprintf("+%.0f us", f), fmt.Sprintf("bridge +%.0f us", us), ratio(f, us)
	} else {
		floor = na(floor)
	}
	rows = append(rows, rtt, floor)

	// BenchmarkReconnectStorm's workload: 5,000 tokens, 20 ms per review,
	// 16 in flight: 6.25 s if the bound is kept full.
	const ideal = 5000 * 0.020 / 16
	storm := benchrow.Row{Figure: "reconnect storm: 5,000 new tokens, API at 20 ms per review", Goal: "<= 1.2x, <= 16 in flight"}
	if s, ok := m.get("BenchmarkReconnectStorm", "storm-s"); ok {
		inflight, _ := m.get("BenchmarkReconnectStorm", "max-inflight")
		storm.Value = fmt.Sprintf("%.2f s, max %.0f in flight", s, inflight)
		storm.Baseline, storm.Ratio = fmt.Sprintf("ideal %.2f s", ideal), ratio(s, ideal)
		storm.Met = yesNo(s/ideal <= 1.2 && inflight <= 16)
	} else {
		storm = na(storm)
	}
	rows = append(rows, storm)

	burst := benchrow.Row{Figure: "extauthz revocation burst, 500 of 5,000 bindings: last delete to last revocation",
		Baseline: "goal 1 s", Goal: "< 1 s"}
	if ms, ok := m.get("BenchmarkRevocationBurst", "ms-last-delete-to-last-revoke"); ok {
		burst.Value, burst.Ratio, burst.Met = fmt.Sprintf("%.0f ms", ms), ratio(ms, 1000), yesNo(ms < 1000)
	} else {
		burst = na(burst)
	}
	rows = append(rows, burst)

	// No goal was set for the recovery figures: the baselines are the
	// outage itself and the agent's first retry after a disconnect.
	relay := benchrow.Row{Figure: "recovery: relay down 3 s, data path down p99 (1,000 agents)", Baseline: "outage 3 s",
		Goal: "-", Met: "-"}
	drain := benchrow.Row{Figure: "recovery: one of two bridges drained, data path down p99 (1,000 agents)",
		Baseline: "agent's first retry 1 s", Goal: "-", Met: "-"}
	if p99, ok := m.get("BenchmarkRecovery", "relay-restart-p99-s"); ok {
		relay.Value, relay.Ratio = fmt.Sprintf("%.2f s", p99), ratio(p99, 3)
		d, _ := m.get("BenchmarkRecovery", "bridge-drain-p99-s")
		drain.Value, drain.Ratio = fmt.Sprintf("%.2f s", d), ratio(d, 1)
	} else {
		relay, drain = na(relay), na(drain)
	}
	// The only bridge replaced; the baseline is the same run
	// without --drain-peers (closes spread over half the drain).
	one := benchrow.Row{Figure: "recovery: the only bridge replaced (new one ready 3 s after SIGTERM), data path down p99, --drain-peers (1,000 agents)",
		Goal: "-", Met: "-"}
	if hold, ok := m.get("BenchmarkOneReplica", "hold-p99-s"); ok {
		spread, _ := m.get("BenchmarkOneReplica", "spread-p99-s")
		hr, _ := m.get("BenchmarkOneReplica", "hold-refused")
		sr, _ := m.get("BenchmarkOneReplica", "spread-refused")
		one.Value = fmt.Sprintf("%.2f s, %.0f refused dials", hold, hr)
		one.Baseline = fmt.Sprintf("spread %.2f s, %.0f refused", spread, sr)
		one.Ratio = ratio(hold, spread)
	} else {
		one = na(one)
	}
	return append(rows, relay, drain, one)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// stealBetween is the stolen share of all CPU time between two /proc/stat
// "cpu" lines.
func stealBetween(a, b string) (float64, error) {
	ta, sa, err := cpuLine(a)
	if err != nil {
		return 0, err
	}
	tb, sb, err := cpuLine(b)
	if err != nil {
		return 0, err
	}
	if tb <= ta {
		return 0, nil
	}
	return float64(sb-sa) / float64(tb-ta), nil
}

func cpuLine(l string) (total, steal int64, err error) {
	f := strings.Fields(l)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, errors.New("not a /proc/stat cpu line: " + l)
	}
	for i, s := range f[1:9] { // user..steal; guest is inside user
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, 0, err
		}
		total += v
		if i == 7 {
			steal = v
		}
	}
	return total, steal, nil
}
