package promql

import (
	"slices"
	"testing"
)

func TestMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`rate(http_requests_total{job="a", code=~"5.."}[5m])`, []string{"http_requests_total"}},
		{`sum by (reason, pod) (rate(a_total[10m])) > 4 * sum by (reason) (rate(a_total[6h] offset 10m))`, []string{"a_total"}},
		{`sum(rate(a[5m])) without (instance) / on(pod) group_left(node) b_info`, []string{"a", "b_info"}},
		{`absent(up{job=~".*gw.*"} == 1)`, []string{"up"}},
		{`x / y > 0.9 and z unless w or v`, []string{"v", "w", "x", "y", "z"}},
		{`histogram_quantile(0.99, sum by (le) (rate(d_seconds_bucket[$__rate_interval])))`, []string{"d_seconds_bucket"}},
		{`label_replace(m, "dst", "$1", "src", "(.*)")`, []string{"m"}},
		{`count_values("version", build_info) or topk(3, q) or quantile(0.5, r) or vector(0)`, []string{"build_info", "q", "r"}},
		{"# a comment naming not_a_metric\nfoo{a=\"}\"} @ start()", []string{"foo"}},
		{`1e3 + 0x1f - 5m`, nil},
		{`SUM BY (a) (x) + Inf`, []string{"x"}},
		{`max_over_time(g[1h:5m]) and ignoring(le) h`, []string{"g", "h"}},
	}
	for _, tt := range tests {
		got, err := MetricNames(tt.expr)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("MetricNames(%q) = %q, %v; want %q", tt.expr, got, err, tt.want)
		}
	}
	for _, bad := range []string{`a{b="c}`, `rate(a[5m)`, `"open`} {
		if _, err := MetricNames(bad); err == nil {
			t.Errorf("MetricNames(%q): no error", bad)
		}
	}
}

func TestSources(t *testing.T) {
	rules, err := RuleExpressions([]byte("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    for: 5m\n  - record: r:x\n    expr: sum(x)\n"))
	if err != nil || rules["g/A"] != "up == 0" || rules["g/r:x"] != "sum(x)" {
		t.Fatalf("rules %v, %v", rules, err)
	}
	dash := `{"panels":[{"targets":[{"expr":"a"}]},{"type":"row","panels":[{"targets":[{"expr":"b"}]}]}],
	  "templating":{"list":[{"name":"ds","type":"datasource","query":"prometheus"},
	    {"name":"ns","type":"query","query":{"query":"label_values(c, namespace)"}},{"name":"p","type":"query","query":"label_values(d, pod)"},
	    {"name":"l","type":"query","query":"label_values(namespace)"}]}}`
	exprs, err := DashboardExpressions([]byte(dash))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range exprs {
		got = append(got, e)
	}
	slices.Sort(got)
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("dashboard expressions %q, want %q", got, want)
	}
}

// FuzzMetricNames: the lexer never panics or loops on any input.
func FuzzMetricNames(f *testing.F) {
	for _, s := range []string{`up`, `sum by (a) (rate(x{b="c"}[5m]))`, `a{b="c}`, "`raw`", `x[`, `by (`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { _, _ = MetricNames(s) })
}
