package manifests

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/wirekube/relay-ws/internal/test/chartdoc"
)

var updateChartReadme = flag.Bool("update-chart-readme", false, "rewrite charts/wirekube-relay-ws/README.md (make chart-readme)")

// chartReadme generates the chart's README from Chart.yaml and values.yaml.
func chartReadme(t *testing.T) (string, []chartdoc.Value) {
	t.Helper()
	var c chartdoc.Chart
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err == nil {
		err = yaml.Unmarshal(data, &c)
	}
	if err != nil {
		t.Fatal(err)
	}
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartdoc.Values(values)
	if err != nil {
		t.Fatal(err)
	}
	return chartdoc.Render(c, vals), vals
}

// TestChartReadme: the committed chart README is what `make chart-readme`
// generates from the chart (every value, its default and its comment), and
// every value has a meaning: its own comment or its block's.
func TestChartReadme(t *testing.T) {
	want, vals := chartReadme(t)
	for _, v := range vals {
		mustf(t, v.Meaning != "", "values.yaml: %s has no comment, nor has any block around it", v.Path)
	}
	path := filepath.Join(chartDir, "README.md")
	if *updateChartReadme {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mustf(t, string(got) == want, "%s differs from the chart's values: run make chart-readme", path)
}
