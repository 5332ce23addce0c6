package manifests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// codeMetricNames returns the series names the binary's code under dir
// registers: the package in dir and every package below it (its rooms
// under internal/, cmd/), each read by packageMetricNames.
func codeMetricNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if !hasGoSource(t, path) {
			return nil
		}
		for n := range packageMetricNames(t, path) {
			names[n] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// hasGoSource reports whether dir holds a Go file other than a test.
func hasGoSource(t *testing.T, dir string) bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".go") && !strings.HasSuffix(e.Name(), "_test.go") {
			return true
		}
	}
	return false
}

// packageMetricNames returns the series names the Go package in dir registers:
// every prometheus.CounterOpts, GaugeOpts and HistogramOpts literal's
// Namespace, Subsystem and Name, read from the source (string literals,
// the package's constants and internal/contract's), histograms expanded to
// their _bucket, _sum and _count series. A literal whose name cannot be
// resolved fails the test rather than going missing.
func packageMetricNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files := parseGoDir(t, dir)
	consts := constValues(files)
	contract := constValues(parseGoDir(t, "../internal/contract"))
	names := map[string]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			kind := promOptsKind(lit.Type)
			if kind == "" {
				return true
			}
			parts := map[string]string{}
			for _, e := range lit.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				key, isIdent := kv.Key.(*ast.Ident)
				if !ok || !isIdent || (key.Name != "Namespace" && key.Name != "Subsystem" && key.Name != "Name") {
					continue
				}
				v, ok := resolveString(kv.Value, consts, contract)
				if !ok {
					t.Fatalf("%s: cannot resolve %s of a prometheus.%s", dir, key.Name, kind)
				}
				parts[key.Name] = v
			}
			name := joinNonEmpty(parts["Namespace"], parts["Subsystem"], parts["Name"])
			if parts["Name"] == "" {
				t.Fatalf("%s: a prometheus.%s without a Name", dir, kind)
			}
			names[name] = true
			if kind == "HistogramOpts" {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					names[name+s] = true
				}
			}
			return true
		})
	}
	return names
}

func parseGoDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("%s: no Go files", dir)
	}
	return files
}

// constValues maps every constant declared in files (at any level) to its
// expression.
func constValues(files []*ast.File) map[string]ast.Expr {
	out := map[string]ast.Expr{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			d, ok := n.(*ast.GenDecl)
			if !ok || d.Tok != token.CONST {
				return true
			}
			for _, s := range d.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if i < len(vs.Values) {
						out[id.Name] = vs.Values[i]
					}
				}
			}
			return true
		})
	}
	return out
}

func promOptsKind(e ast.Expr) string {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
		return ""
	}
	switch sel.Sel.Name {
	case "CounterOpts", "GaugeOpts", "HistogramOpts", "SummaryOpts":
		return sel.Sel.Name
	}
	return ""
}

func resolveString(e ast.Expr, consts, contract map[string]ast.Expr) (string, bool) {
	switch v := e.(type) {
	case *ast.BasicLit:
		s, err := strconv.Unquote(v.Value)
		return s, err == nil
	case *ast.Ident:
		if c, ok := consts[v.Name]; ok {
			return resolveString(c, consts, contract)
		}
	case *ast.SelectorExpr:
		if x, ok := v.X.(*ast.Ident); ok && x.Name == "contract" {
			if c, ok := contract[v.Sel.Name]; ok {
				return resolveString(c, contract, contract)
			}
		}
	case *ast.BinaryExpr:
		if v.Op == token.ADD {
			a, okA := resolveString(v.X, consts, contract)
			b, okB := resolveString(v.Y, consts, contract)
			return a + b, okA && okB
		}
	}
	return "", false
}

func joinNonEmpty(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "_")
}
