package main

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/test/benchrow"
	"github.com/wirekube/relay-ws/internal/test/stack"
)

// TestPerformanceFiguresArePrintedByABenchmark: every row of every table in
// docs/performance.md names a figure that the benchmark code prints (a
// string literal of a file that builds benchrow rows), so a figure that no
// benchmark prints any more cannot stay in the document.
func TestPerformanceFiguresArePrintedByABenchmark(t *testing.T) {
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, performanceDoc))
	if err != nil {
		t.Fatal(err)
	}
	figures := tableFigures(string(doc))
	if len(figures) < 20 {
		t.Fatalf("%s has %d figure rows; want the whole make bench table", performanceDoc, len(figures))
	}
	printed := printedFigures(t, root)
	for _, f := range figures {
		if !printed[f] {
			t.Errorf("%s figure %q: no benchmark prints it (no such literal in a file that builds benchrow rows)",
				performanceDoc, f)
		}
	}
}

// performanceDoc is the document make bench writes its table into (the
// Makefile's bench target passes it to -doc).
const performanceDoc = "docs/performance.md"

// tableFigures returns the first cell of every table row of doc, except
// each table's header and separator.
func tableFigures(doc string) []string {
	var out []string
	for _, r := range tableRows(doc) {
		out = append(out, r[0])
	}
	return out
}

// printedFigures collects the string literals of every Go file that uses
// benchrow (or is package benchtable).
func printedFigures(t *testing.T, root string) map[string]bool {
	lits := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".cache" || d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		uses := f.Name.Name == "main" && filepath.Base(filepath.Dir(path)) == "benchtable"
		for _, imp := range f.Imports {
			uses = uses || strings.HasSuffix(imp.Path.Value, `/internal/test/benchrow"`)
		}
		if !uses {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if bl, ok := n.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				if s, err := strconv.Unquote(bl.Value); err == nil {
					lits[s] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return lits
}

// TestReportCollectsRowsAndMetrics: the table holds the marked rows and the
// rows built from go test -bench metric lines, with their values.
func TestReportCollectsRowsAndMetrics(t *testing.T) {
	var sb strings.Builder
	benchrow.Print(&sb, benchrow.Row{Figure: "a figure", Value: "7 KiB", Baseline: "naive 14 KiB", Ratio: "0.50", Goal: "<= 12 KiB", Met: "yes"})
	out := "goos: linux\nBenchmarkCheckCacheHit-2   \t  100000\t     12500 ns/op\t    3000 B/op\t      50 allocs/op\n" + sb.String()
	var w strings.Builder
	if err := report(&w, []byte(out), ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| a figure ", "| 7 KiB ", "| naive 14 KiB ",
		"| extauthz Check, cache hit, in process ", "| 12.5 us, 50 allocs ", "| 1.04 ", "| <= 12 us, <= 60 allocs ",
		"| extauthz checks/s over gRPC vs a no-op Check server ", "| not measured ",
		"| steal time during the whole make bench run ",
	} {
		if !strings.Contains(w.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, w.String())
		}
	}
}

// TestReportRoundTripFloor: BenchmarkRoundTrip's metrics give the bridge's
// row against the naive gateway and the floor's row against the bridge.
func TestReportRoundTripFloor(t *testing.T) {
	out := "BenchmarkRoundTrip-2 \t 1\t 5824339666 ns/op\t 100.0 Go_TCP_forwarder_(floor)_added_p50_us\t 80.00 bridge_(ws)_added_p50_us\t 320.0 naive_gateway_(ws)_added_p50_us\n"
	var w strings.Builder
	if err := report(&w, []byte(out), ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| +80 us ", "| naive gateway +320 us ", "| 0.25 ",
		"| added p50 round trip through a plain Go TCP forwarder, the floor of a process hop (BenchmarkRoundTrip) ",
		"| +100 us ", "| bridge +80 us ", "| 1.25 ",
	} {
		if !strings.Contains(w.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, w.String())
		}
	}
}

// TestReplaceTableKeepsTheTextAround: the lines between the markers become
// the new table; the text before the begin line and from the end line on
// is kept byte for byte.
func TestReplaceTableKeepsTheTextAround(t *testing.T) {
	doc := "# Perf\n\nhand text\n<!-- benchtable:begin (generated) -->\n| old | row |\n| --- | --- |\n| a | 1 |\n" +
		"<!-- benchtable:end -->\n\nmore hand text\n| other | table |\n"
	got, err := replaceTable([]byte(doc), []byte("| new |\n| --- |\n| b |\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := "# Perf\n\nhand text\n<!-- benchtable:begin (generated) -->\n| new |\n| --- |\n| b |\n" +
		"<!-- benchtable:end -->\n\nmore hand text\n| other | table |\n"
	if string(got) != want {
		t.Errorf("replaceTable:\n%s\nwant:\n%s", got, want)
	}
	for _, bad := range []string{"no markers\n", "<!-- benchtable:begin -->\n| a |\n", "<!-- benchtable:end -->\n"} {
		if _, err := replaceTable([]byte(bad), []byte("| b |\n")); !errors.Is(err, errNoMarkers) {
			t.Errorf("replaceTable(%q): err %v, want errNoMarkers", bad, err)
		}
	}
}

// TestPerformanceDocHoldsOneMakeBenchTable: docs/performance.md has the
// markers make bench writes between, and between them exactly one table
// in benchrow's format, whose figures start with the extauthz rows and end
// with the run's steal time, as benchtable prints them.
func TestPerformanceDocHoldsOneMakeBenchTable(t *testing.T) {
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, performanceDoc))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), beginMarker)
	_, body, _ := strings.Cut(after, "\n")
	body, _, ok2 := strings.Cut(body, endMarker)
	if !ok || !ok2 {
		t.Fatalf("%s: no %q ... %q lines", performanceDoc, beginMarker, endMarker)
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "| ") || !strings.HasSuffix(l, " |") {
			t.Fatalf("%s: line %d between the markers is not a table row: %q", performanceDoc, i+1, l)
		}
	}
	figures := tableFigures(body)
	if len(figures) < 20 || figures[0] != "extauthz Check, cache hit, in process" ||
		figures[len(figures)-1] != "steal time during the whole make bench run" {
		t.Errorf("%s: the table between the markers is not benchtable's (%d rows)", performanceDoc, len(figures))
	}
}

// tableRows returns the trimmed cells of every table row of doc, except
// each table's header and separator.
func tableRows(doc string) [][]string {
	var out [][]string
	inTable := false
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if !inTable { // the header
			inTable = true
			continue
		}
		if strings.Trim(cells[0], "-: ") == "" { // the separator
			continue
		}
		out = append(out, cells)
	}
	return out
}

// TestReadmeFiguresAreRowsOfThePerformanceDoc: each row of the README's
// headline figures is, cell for cell, a row of docs/performance.md (whose
// figures the test above holds to a benchmark), so the README cannot show
// a figure of its own or an older value.
func TestReadmeFiguresAreRowsOfThePerformanceDoc(t *testing.T) {
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, performanceDoc))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(readme), "\n## Figures\n")
	if !ok {
		t.Fatal("README.md has no ## Figures section")
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	known := map[string]bool{}
	for _, r := range tableRows(string(doc)) {
		known[strings.Join(r, " | ")] = true
	}
	rows := tableRows(sec)
	if len(rows) < 3 {
		t.Fatalf("README.md's Figures section has %d rows: the parser is broken or the headline figures are gone", len(rows))
	}
	for _, r := range rows {
		if !known[strings.Join(r, " | ")] {
			t.Errorf("README.md figure row %q is no row of %s (same figure, value, baseline, ratio, goal, met?)", r, performanceDoc)
		}
	}
}
