package main

import (
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/test/benchrow"
)

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
		"| extauthz Check, cache hit, in process ", "| 12.5 us, 50 allocs ", "| 0.62 ",
		"| extauthz checks/s over gRPC vs a no-op Check server ", "| not measured ",
		"| steal time during the whole make bench run ",
	} {
		if !strings.Contains(w.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, w.String())
		}
	}
}
