package datapath

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// row is one line of the report: a figure, its baseline and the goal on
// their ratio (or on the value itself).
type row struct {
	figure, value, baseline, ratio, goal, met string
}

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
	wd := [6]int{}
	head := row{"figure", "value", "baseline", "ratio", "goal", "met?"}
	for _, x := range append([]row{head}, rows...) {
		for i, s := range []string{x.figure, x.value, x.baseline, x.ratio, x.goal, x.met} {
			wd[i] = max(wd[i], len(s))
		}
	}
	line := func(x row) {
		fmt.Fprintf(w, "| %-*s | %-*s | %-*s | %-*s | %-*s | %-*s |\n", wd[0], x.figure, wd[1], x.value,
			wd[2], x.baseline, wd[3], x.ratio, wd[4], x.goal, wd[5], x.met)
	}
	line(head)
	fmt.Fprintf(w, "|%s|%s|%s|%s|%s|%s|\n", dashes(wd[0]), dashes(wd[1]), dashes(wd[2]), dashes(wd[3]), dashes(wd[4]), dashes(wd[5]))
	for _, x := range rows {
		line(x)
	}
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
}

func dashes(n int) string { return strings.Repeat("-", n+2) }

func (r *Result) rows() []row {
	var rows []row
	for _, pl := range []int{small, large} {
		rows = append(rows, r.ratioRow(fmt.Sprintf("bridge CPU s/GB, %s", size(pl)), pBridge, pNaive,
			func(f *Figures) float64 { return f.totalCPU(pl) }, r.cpuText, pl, 0.4, true))
	}
	rows = append(rows, r.rssRow())
	for _, chain := range []string{pChain, pChainUDS} {
		for _, pl := range []int{small, large} {
			rows = append(rows, r.ratioRow(fmt.Sprintf("%s CPU s/GB, %s", chain, size(pl)), chain, pNaiveTLS,
				func(f *Figures) float64 { return f.totalCPU(pl) }, r.cpuText, pl, 1.0, true))
		}
	}
	rows = append(rows, r.ratioRow(fmt.Sprintf("%s RSS / idle session", pChain), pChain, pNaiveTLS,
		(*Figures).totalRSS, func(n string, _ int) string { return r.rssText(n) }, 0, 1.0, true))
	rows = append(rows, r.ratioRow("throughput, bridge vs direct TCP, 1,400 B", pBridge, pDirect,
		func(f *Figures) float64 { return f.MBps[small] }, r.mbpsText, small, 0.9, false))
	rows = append(rows, r.ratioRow("throughput, bridge vs direct TCP, 16 KiB", pBridge, pDirect,
		func(f *Figures) float64 { return f.MBps[large] }, r.mbpsText, large, 0.9, false))
	b, d := r.Paths[pBridge], r.Paths[pDirect]
	added := b.P50 - d.P50
	rows = append(rows, row{"p50 round trip added by the bridge", us(b.P50), "direct " + us(d.P50), "+" + us(added),
		"< 50us added", yesNo(added < 50*time.Microsecond)})
	rows = append(rows, row{"steal time during the run (noise)", fmt.Sprintf("%.1f %%", 100*r.Steal), "-", "-", "-", "-"})
	return rows
}

// ratioRow compares path with base on value; lower says the goal is a
// ceiling (CPU, memory), else a floor (throughput).
func (r *Result) ratioRow(figure, path, base string, value func(*Figures) float64,
	text func(string, int) string, payload int, goal float64, lower bool) row {
	f, fb := r.Paths[path], r.Paths[base]
	if f == nil || fb == nil {
		return row{figure, "n/a", "n/a", "-", goalText(goal, lower), "not measured"}
	}
	v, bv := value(f), value(fb)
	if bv == 0 {
		return row{figure, text(path, payload), text(base, payload), "-", goalText(goal, lower), "-"}
	}
	ratio := v / bv
	met := ratio >= goal
	if lower {
		met = ratio <= goal
	}
	return row{figure, text(path, payload), shortName(base) + " " + text(base, payload), fmt.Sprintf("%.2f", ratio),
		goalText(goal, lower), yesNo(met)}
}

func (r *Result) rssRow() row {
	b, n := r.Paths[pBridge], r.Paths[pNaive]
	kib := b.totalRSS() / 1024
	ratio := "-"
	if n.totalRSS() > 0 {
		ratio = fmt.Sprintf("%.2f", b.totalRSS()/n.totalRSS())
	}
	return row{fmt.Sprintf("bridge RSS / idle registered session (%d)", b.Sessions), r.rssText(pBridge),
		"naive " + r.rssText(pNaive), ratio, "<= 12 KiB", yesNo(kib <= 12)}
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

func size(payload int) string {
	if payload == large {
		return "16 KiB"
	}
	return "1,400 B"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

func us(d time.Duration) string { return fmt.Sprintf("%.0fus", float64(d)/float64(time.Microsecond)) }
