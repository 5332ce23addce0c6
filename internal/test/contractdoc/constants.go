package contractdoc

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Const is a string constant of internal/contract, read from its source.
type Const struct {
	Name  string // Go identifier
	Type  string // declared type ("" when untyped)
	Value string
	File  string // relative to the repository root
}

// Constants returns every string constant of internal/contract whose
// declared type is typ ("" for all), so a constant added there reaches the
// tests without a list naming it.
func Constants(t testing.TB, typ string) []Const {
	t.Helper()
	all, err := ParseConstants(filepath.Join(Root(t), "internal", "contract"))
	if err != nil {
		t.Fatal(err)
	}
	var out []Const
	for _, c := range all {
		if typ == "" || c.Type == typ {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		t.Fatalf("contractdoc: no %q constant in internal/contract", typ)
	}
	return out
}

// ParseConstants reads the string constants declared in dir's non-test Go
// files. A constant of a named type carries the type of its spec; one
// without a value of its own or with a value that is not a literal is an
// error (the contract spells its values out, and a test must not miss one).
func ParseConstants(dir string) ([]Const, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("contractdoc: no Go files in %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	var out []Const
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("contractdoc: %w", err)
		}
		cs, err := fileConstants(f, filepath.Join("internal", "contract", filepath.Base(path)))
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

func fileConstants(f *ast.File, rel string) ([]Const, error) {
	var out []Const
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			typ := ""
			if id, ok := vs.Type.(*ast.Ident); ok {
				typ = id.Name
			}
			for i, n := range vs.Names {
				if i >= len(vs.Values) {
					return nil, fmt.Errorf("contractdoc: %s: %s has no value of its own", rel, n.Name)
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					return nil, fmt.Errorf("contractdoc: %s: %s is not a literal (the contract spells its values out)", rel, n.Name)
				}
				if lit.Kind != token.STRING {
					continue // a number: no code
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					return nil, fmt.Errorf("contractdoc: %s: %s: %w", rel, n.Name, err)
				}
				out = append(out, Const{Name: n.Name, Type: typ, Value: v, File: rel})
			}
		}
	}
	return out, nil
}
