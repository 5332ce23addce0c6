package version

import (
	"flag"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildInfoGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector())
	want := `# HELP wirekube_build_info Always 1; the labels name the release and the Go toolchain of this binary.
# TYPE wirekube_build_info gauge
wirekube_build_info{goversion="` + GoVersion() + `",version="` + Version + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "wirekube_build_info"); err != nil {
		t.Fatal(err)
	}
}

func TestFlagAndString(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	v := AddFlag(fs)
	if err := fs.Parse([]string{"--version"}); err != nil || !*v {
		t.Fatalf("parse: %v, set %v", err, *v)
	}
	var b strings.Builder
	if err := Print(&b, "wirekube-x"); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.HasPrefix(got, "wirekube-x dev (go") || !strings.HasSuffix(got, "\n") {
		t.Fatalf("Print = %q", got)
	}
}
