package datapath

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wirekube/relay-ws/internal/test/benchrow"
)

// row is one line of the report: a figure, its baseline and the goal on
// their ratio (or on the value itself).
type row = benchrow.Row

// Print writes the report: one table of every figure with its baseline,
// ratio, goal and whether it was met, then the raw figures per path.
func (r *Result) Print(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "bridge benchmark: loopback, reference relay in the load generator's process, every gateway a child process;\n")
	fmt.Fprintf(w, "  two peers exchange %d x 1,400-byte and %d x 16 KiB Data frames each way (window %d), %d pings of %d bytes;\n",
		c.Frames1400, c.Frames16K, c.Window, c.PingPongs, c.PingPayload)
	fmt.Fprintf(w, "  best of %d interleaved rounds; %d idle registered sessions per memory reading; run took %s; steal %.1f %% of CPU time\n",
		max(c.Rounds, 1), c.IdleSessions, r.Elapsed.Round(time.Second), 100*r.Steal)
	if r.Note != "" {
		fmt.Fprintf(w, "  note: %s\n", r.Note)
	}
	rows := r.rows()
	benchrow.Table(w, rows)
	fmt.Fprintf(w, "raw figures per path (CPU s/GB per process; MB/s is payload both ways):\n")
	for _, name := range r.Order {
		f := r.Paths[name]
		fmt.Fprintf(w, "  %-38s 1,400 B: %s, %6.1f MB/s; 16 KiB: %s, %6.1f MB/s; p50 %s p99 %s", name,
			r.cpuText(name, small), f.MBps[small], r.cpuText(name, large), f.MBps[large], us(f.P50), us(f.P99))
		if f.Sessions > 0 {
			fmt.Fprintf(w, "; idle session %s", r.rssText(name))
		}
		fmt.Fprintln(w)
	}
	benchrow.Print(w, rows...)
}

func (r *Result) rows() []row {
	cpu := func(pl int) func(*Figures) float64 { return func(f *Figures) float64 { return f.totalCPU(pl) } }
	mbps := func(pl int) func(*Figures) float64 { return func(f *Figures) float64 { return f.MBps[pl] } }
	rss := func(n string, _ int) string { return r.rssText(n) }
	b, d := r.Paths[pBridge], r.Paths[pDirect]
	added := b.P50 - d.P50
	return []row{
		r.ratioRow("bridge CPU s/GB, 1,400 B", pBridge, pNaive, cpu(small), r.cpuText, small, 0.4, true),
		r.ratioRow("bridge CPU s/GB, 16 KiB", pBridge, pNaive, cpu(large), r.cpuText, large, 0.4, true),
		r.rssRow(),
		r.ratioRow("nginx TLS + bridge (TCP hop) CPU s/GB, 1,400 B", pChain, pNaiveTLS, cpu(small), r.cpuText, small, 0.5, true),
		r.ratioRow("nginx TLS + bridge (TCP hop) CPU s/GB, 16 KiB", pChain, pNaiveTLS, cpu(large), r.cpuText, large, 0.5, true),
		r.ratioRow("nginx TLS + bridge (Unix socket hop) CPU s/GB, 1,400 B", pChainUDS, pNaiveTLS, cpu(small), r.cpuText, small, 0.5, true),
		r.ratioRow("nginx TLS + bridge (Unix socket hop) CPU s/GB, 16 KiB", pChainUDS, pNaiveTLS, cpu(large), r.cpuText, large, 0.5, true),
		r.ratioRow("nginx TLS + bridge (TCP hop) RSS / idle session", pChain, pNaiveTLS, (*Figures).totalRSS, rss, 0, 1.0, true),
		r.ratioRow("nginx TLS + bridge vs WireKube relay-ws (Go TLS) CPU s/GB, 1,400 B", pChain, pWireKube, cpu(small), r.cpuText, small, 0.8, true),
		r.ratioRow("nginx TLS + bridge vs WireKube relay-ws (Go TLS) CPU s/GB, 16 KiB", pChain, pWireKube, cpu(large), r.cpuText, large, 1.0, true),
		r.ratioRow("nginx TLS + bridge vs WireKube relay-ws (Go TLS) RSS / idle session", pChain, pWireKube, (*Figures).totalRSS, rss, 0, 1.0, true),
		r.addedRow("nginx TLS + bridge vs WireKube relay-ws (Go TLS) added p50 round trip", pChain, pWireKube, 1.2),
		r.ratioRow("nginx TLS + bridge vs nginx TLS + WireKube relay-ws, same front: CPU s/GB, 1,400 B", pChain, pWireKubeChain, cpu(small), r.cpuText, small, 1.0, true),
		r.ratioRow("nginx TLS + bridge vs nginx TLS + WireKube relay-ws, same front: CPU s/GB, 16 KiB", pChain, pWireKubeChain, cpu(large), r.cpuText, large, 1.0, true),
		r.ratioRow("nginx TLS + bridge vs nginx TLS + WireKube relay-ws, same front: RSS / idle session", pChain, pWireKubeChain, (*Figures).totalRSS, rss, 0, 1.0, true),
		r.addedRow("nginx TLS + bridge vs nginx TLS + WireKube relay-ws, same front: added p50 round trip", pChain, pWireKubeChain, 1.0),
		r.ratioRow("throughput, bridge vs direct TCP, 1,400 B", pBridge, pDirect, mbps(small), r.mbpsText, small, 0.9, false),
		r.ratioRow("throughput, bridge vs direct TCP, 16 KiB", pBridge, pDirect, mbps(large), r.mbpsText, large, 0.9, false),
		{Figure: "p50 round trip added by the bridge", Value: us(b.P50), Baseline: "direct " + us(d.P50), Ratio: "+" + us(added),
			Goal: "< 50us added", Met: yesNo(added < 50*time.Microsecond)},
		{Figure: "steal time during the datapath run (noise)", Value: fmt.Sprintf("%.1f %%", 100*r.Steal), Baseline: "-", Ratio: "-", Goal: "-", Met: "-"},
	}
}

// addedRow compares the round trip path adds to direct TCP's with what
// base adds, both from the same run's ping-pong; goal is the ceiling of
// their ratio.
func (r *Result) addedRow(figure, path, base string, goal float64) row {
	f, fb, d := r.Paths[path], r.Paths[base], r.Paths[pDirect]
	if f == nil || fb == nil || f.P50 == 0 || fb.P50 == 0 {
		return row{Figure: figure, Value: "n/a", Baseline: "n/a", Ratio: "-", Goal: goalText(goal, true), Met: "not measured"}
	}
	a, ab := f.P50-d.P50, fb.P50-d.P50
	ratio := float64(a) / float64(ab)
	return row{Figure: figure, Value: "+" + us(a), Baseline: shortName(base) + " +" + us(ab),
		Ratio: fmt.Sprintf("%.2f", ratio), Goal: goalText(goal, true), Met: yesNo(ab > 0 && ratio <= goal)}
}

// ratioRow compares path with base on value; lower says the goal is a
// ceiling (CPU, memory), else a floor (throughput).
func (r *Result) ratioRow(figure, path, base string, value func(*Figures) float64,
	text func(string, int) string, payload int, goal float64, lower bool) row {
	f, fb := r.Paths[path], r.Paths[base]
	if f == nil || fb == nil {
		return row{Figure: figure, Value: "n/a", Baseline: "n/a", Ratio: "-", Goal: goalText(goal, lower), Met: "not measured"}
	}
	v, bv := value(f), value(fb)
	if v == 0 { // the path did not run (WIREKUBE_BENCH_ONLY)
		return row{Figure: figure, Value: "n/a", Baseline: text(base, payload), Ratio: "-", Goal: goalText(goal, lower), Met: "not measured"}
	}
	if bv == 0 {
		return row{Figure: figure, Value: text(path, payload), Baseline: text(base, payload), Ratio: "-", Goal: goalText(goal, lower), Met: "-"}
	}
	ratio := v / bv
	met := ratio >= goal
	if lower {
		met = ratio <= goal
	}
	return row{Figure: figure, Value: text(path, payload), Baseline: shortName(base) + " " + text(base, payload),
		Ratio: fmt.Sprintf("%.2f", ratio), Goal: goalText(goal, lower), Met: yesNo(met)}
}

func (r *Result) rssRow() row {
	b, n := r.Paths[pBridge], r.Paths[pNaive]
	kib := b.totalRSS() / 1024
	ratio := "-"
	if n.totalRSS() > 0 {
		ratio = fmt.Sprintf("%.2f", b.totalRSS()/n.totalRSS())
	}
	return row{Figure: "bridge RSS / idle registered session, revocation off", Value: fmt.Sprintf("%s (%d sessions)", r.rssText(pBridge), b.Sessions),
		Baseline: "naive " + r.rssText(pNaive), Ratio: ratio, Goal: "<= 12 KiB", Met: yesNo(kib <= 12)}
}

func (r *Result) cpuText(name string, payload int) string {
	f := r.Paths[name]
	if len(f.Procs) == 0 || len(f.CPU[payload]) != len(f.Procs) {
		return "-"
	}
	s := fmt.Sprintf("%.2f", f.totalCPU(payload))
	if len(f.Procs) > 1 {
		parts := make([]string, len(f.Procs))
		for i, p := range f.Procs {
			parts[i] = fmt.Sprintf("%s %.2f", p, f.CPU[payload][i])
		}
		s += " (" + strings.Join(parts, " + ") + ")"
	}
	return s
}

func (r *Result) rssText(name string) string {
	f := r.Paths[name]
	if len(f.RSS) != len(f.Procs) {
		return "-"
	}
	s := fmt.Sprintf("%.1f KiB", f.totalRSS()/1024)
	if len(f.Procs) > 1 {
		parts := make([]string, len(f.Procs))
		for i, p := range f.Procs {
			parts[i] = fmt.Sprintf("%s %.1f", p, f.RSS[i]/1024)
		}
		s += " (" + strings.Join(parts, " + ") + ")"
	}
	return s
}

func (r *Result) mbpsText(name string, payload int) string {
	return fmt.Sprintf("%.0f MB/s", r.Paths[name].MBps[payload])
}

func shortName(p string) string {
	switch p {
	case pNaive:
		return "naive"
	case pNaiveTLS:
		return "naive TLS"
	case pWireKube:
		return "WireKube"
	case pWireKubeChain:
		return "nginx + WireKube"
	case pDirect:
		return "direct"
	}
	return p
}

func goalText(g float64, lower bool) string {
	if lower {
		return fmt.Sprintf("<= %.1fx", g)
	}
	return fmt.Sprintf(">= %.1fx", g)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

func us(d time.Duration) string { return fmt.Sprintf("%.0fus", float64(d)/float64(time.Microsecond)) }
