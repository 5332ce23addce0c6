package manifests

import (
	"slices"
	"testing"
)

// TestChartEnvoyConcurrency: Envoy runs as many workers as its CPU limit
// allows (rounded up), or envoy.concurrency when set, never one per CPU of
// the node; envoy.extraArgs follow the chart's arguments.
func TestChartEnvoyConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  string
		want []string // the args after --log-level info
	}{
		{"default limit of 1 CPU", "", []string{"--concurrency", "1"}},
		{"limit in millicores rounds up", "envoy.resources.limits.cpu=2500m", []string{"--concurrency", "3"}},
		{"limit in cores", "envoy.resources.limits.cpu=2", []string{"--concurrency", "2"}},
		{"no limit", "envoy.resources.limits.cpu=null", []string{"--concurrency", "1"}},
		{"explicit", "envoy.concurrency=4", []string{"--concurrency", "4"}},
		{"extra args last", "envoy.extraArgs={--component-log-level=upstream:debug}", []string{"--concurrency", "1", "--component-log-level=upstream:debug"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var extra []string
			if tc.set != "" {
				extra = []string{"--set", tc.set}
			}
			c := container(renderChart(t, extra...).deployment(t), "envoy")
			mustf(t, c != nil, "no envoy container")
			i := slices.Index(c.Args, "--log-level")
			mustf(t, i >= 0 && slices.Equal(c.Args[i+2:], tc.want), "envoy args %v, want %v after --log-level", c.Args, tc.want)
		})
	}
}
