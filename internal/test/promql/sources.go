package promql

import (
	"encoding/json"
	"fmt"
	"regexp"

	"sigs.k8s.io/yaml"
)

// RuleExpressions returns the expr of every rule in a Prometheus rule file
// (or a PrometheusRule spec: a document with top-level groups), keyed by the
// rule's alert or record name.
func RuleExpressions(doc []byte) (map[string]string, error) {
	var f struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert  string `json:"alert"`
				Record string `json:"record"`
				Expr   string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(doc, &f); err != nil {
		return nil, fmt.Errorf("promql: rules: %w", err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			name := g.Name + "/" + r.Alert + r.Record
			if r.Expr == "" {
				return nil, fmt.Errorf("promql: rule %s has no expr", name)
			}
			out[name] = r.Expr
		}
	}
	return out, nil
}

// DashboardExpressions returns every PromQL expression of a Grafana
// dashboard, keyed by where it is: each "expr" (panel targets, panels nested
// in rows) and the query of each templating variable of type "query"
// (label_values(metric, label) and the like).
func DashboardExpressions(doc []byte) (map[string]string, error) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("promql: dashboard: %w", err)
	}
	out := map[string]string{}
	walk(v, "$", out)
	var d struct {
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("promql: dashboard: %w", err)
	}
	for _, tv := range d.Templating.List {
		if tv.Type != "query" {
			continue
		}
		var q string
		if json.Unmarshal(tv.Query, &q) != nil {
			var obj struct{ Query string }
			if err := json.Unmarshal(tv.Query, &obj); err != nil {
				return nil, fmt.Errorf("promql: dashboard variable %s: %w", tv.Name, err)
			}
			q = obj.Query
		}
		if q = variableExpr(q); q != "" {
			out["templating."+tv.Name] = q
		}
	}
	return out, nil
}

var (
	labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)
	queryResult = regexp.MustCompile(`^\s*query_result\((.*)\)\s*$`)
	noMetric    = regexp.MustCompile(`^\s*(label_values\(\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)|label_names\(\)|metrics\(.*\))\s*$`)
)

// variableExpr turns a Grafana Prometheus variable query into the PromQL
// it evaluates ("" when it reads no metric).
func variableExpr(q string) string {
	switch {
	case noMetric.MatchString(q):
		return ""
	case labelValues.MatchString(q):
		return labelValues.FindStringSubmatch(q)[1]
	case queryResult.MatchString(q):
		return queryResult.FindStringSubmatch(q)[1]
	}
	return q
}

func walk(v any, path string, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			if s, ok := c.(string); ok && k == "expr" {
				out[path+"."+k] = s
				continue
			}
			walk(c, path+"."+k, out)
		}
	case []any:
		for i, c := range v {
			walk(c, fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}
