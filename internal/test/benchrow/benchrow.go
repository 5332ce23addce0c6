// Package benchrow is the one row format of every figure `make bench`
// prints: each benchmark writes its figures as Row lines (Print) beside its
// own report, and bench/cmd/benchtable gathers the lines of the whole run
// into one table (docs/performance.md). A Row's Figure must be a string
// literal at the Row's construction: the test of bench/cmd/benchtable finds
// every figure a benchmark can print that way, so a figure no benchmark
// prints cannot stay in docs/performance.md.
package benchrow

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Row is one figure: its value, the baseline measured in the same run, the
// ratio of the two, the goal and whether it was met ("-" where a column
// does not apply).
type Row struct {
	Figure, Value, Baseline, Ratio, Goal, Met string
}

// marker starts every row line in a benchmark's output.
const marker = "BENCHROW\t"

// Print writes rows as marked lines, one a row, tab-separated.
func Print(w io.Writer, rows ...Row) {
	for _, r := range rows {
		f := []string{r.Figure, r.Value, r.Baseline, r.Ratio, r.Goal, r.Met}
		for i, s := range f {
			s = strings.NewReplacer("\t", " ", "\n", " ").Replace(s)
			if s == "" {
				s = "-"
			}
			f[i] = s
		}
		fmt.Fprintf(w, "%s%s\n", marker, strings.Join(f, "\t"))
	}
}

// Collect returns the rows of every marked line in r, in order.
func Collect(r io.Reader) ([]Row, error) {
	var rows []Row
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		// go test -bench prints a benchmark's name before its output on the
		// same line: the marker may follow it.
		_, rest, ok := strings.Cut(sc.Text(), marker)
		if !ok {
			continue
		}
		f := strings.Split(rest, "\t")
		if len(f) != 6 {
			return nil, fmt.Errorf("benchrow: %d fields in %q", len(f), rest)
		}
		rows = append(rows, Row{f[0], f[1], f[2], f[3], f[4], f[5]})
	}
	return rows, sc.Err()
}

// maxPad bounds the padding of a column: a cell longer than this (the
// scale rows' values carry their run's conditions) is written as it is
// instead of widening every line of its column, which kept
// docs/performance.md tens of KiB larger for nothing a reader sees.
const maxPad = 40

// Table writes rows as one Markdown table, each column aligned up to
// maxPad characters.
func Table(w io.Writer, rows []Row) {
	head := Row{"figure", "value", "baseline", "ratio", "goal", "met?"}
	var wd [6]int
	cols := func(r Row) [6]string { return [6]string{r.Figure, r.Value, r.Baseline, r.Ratio, r.Goal, r.Met} }
	for _, r := range append([]Row{head}, rows...) {
		for i, s := range cols(r) {
			wd[i] = max(wd[i], min(len(s), maxPad))
		}
	}
	line := func(c [6]string) {
		var b strings.Builder
		for i, s := range c {
			fmt.Fprintf(&b, "| %-*s ", wd[i], s)
		}
		fmt.Fprintln(w, b.String()+"|")
	}
	line(cols(head))
	var sep [6]string
	for i := range sep {
		sep[i] = strings.Repeat("-", wd[i])
	}
	line(sep)
	for _, r := range rows {
		line(cols(r))
	}
}
