package readme

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/test/contractdoc"
)

// scanCodes returns every reason or result code of the module: the string
// constants of internal/contract's named types (read by contractdoc), and constants of type
// contract.Reason declared elsewhere. Close codes come from the bridge's
// closeWith(code, reason, err) calls.
func scanCodes(t *testing.T, root string) []codeConst {
	t.Helper()
	fset := token.NewFileSet()
	files := parseModule(t, root, fset)
	types := map[string]bool{} // named string types of internal/contract
	for rel, f := range files {
		if path.Dir(rel) == "internal/contract" {
			maps.Copy(types, namedStringTypes(f))
		}
	}
	var codes []codeConst
	byName := map[string]int{} // name as the bridge spells it -> index in codes
	for _, c := range contractdoc.Constants(t, "") {
		if types[c.Type] && !notCodeTypes[c.Type] {
			byName["contract."+c.Name] = len(codes)
			codes = append(codes, codeConst{name: "contract." + c.Name, value: c.Value, file: filepath.ToSlash(c.File)})
		}
	}
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		dir := path.Dir(rel)
		if dir == "internal/contract" {
			continue // read above, by internal/test/contractdoc
		}
		for _, spec := range constSpecs(files[rel]) {
			if typeName(spec.Type) != "contract.Reason" {
				continue
			}
			for i, name := range spec.Names {
				if i >= len(spec.Values) {
					continue
				}
				lit, ok := spec.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue // an alias of another constant: that one is listed
				}
				v, _ := strconv.Unquote(lit.Value)
				qual := name.Name
				if dir != "bridge" {
					qual = path.Base(dir) + "." + name.Name
				}
				byName[qual] = len(codes)
				codes = append(codes, codeConst{name: qual, value: v, file: rel})
			}
		}
	}
	for rel, f := range files {
		if path.Dir(rel) != "bridge" {
			continue
		}
		for _, call := range closeWithCalls(f) {
			addCloseCode(t, fset, codes, byName, call)
		}
	}
	return codes
}

func addCloseCode(t *testing.T, fset *token.FileSet, codes []codeConst, byName map[string]int, call *ast.CallExpr) {
	t.Helper()
	code, ok := closeCodeOf(call.Args[0])
	if !ok {
		t.Errorf("closeWith(%s, ...) at %s: unknown close code expression; add it to wsCloseCodes in "+
			"internal/test/readme/spec_test.go", exprString(call.Args[0]), fset.Position(call.Pos()))
		return
	}
	i, ok := byName[exprString(call.Args[1])]
	if !ok {
		t.Errorf("closeWith(..., %s) at %s: not a reason constant of internal/contract or bridge/",
			exprString(call.Args[1]), fset.Position(call.Pos()))
		return
	}
	if !slices.Contains(codes[i].closeCodes, code) {
		codes[i].closeCodes = append(codes[i].closeCodes, code)
		sort.Ints(codes[i].closeCodes)
	}
}

// parseModule parses every non-test Go file of the module (not caches, not
// testdata, not the separate kubebin module), keyed by slash path.
func parseModule(t *testing.T, root string, fset *token.FileSet) map[string]*ast.File {
	t.Helper()
	files := map[string]*ast.File{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "kubebin" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func constSpecs(f *ast.File) []*ast.ValueSpec {
	var out []*ast.ValueSpec
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			out = append(out, s.(*ast.ValueSpec))
		}
	}
	return out
}

// namedStringTypes lists the file's string types: `type X string` and
// aliases of string or Reason.
func namedStringTypes(f *ast.File) map[string]bool {
	out := map[string]bool{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, s := range gd.Specs {
			ts := s.(*ast.TypeSpec)
			// type X string, and aliases of string or Reason (type X = Reason).
			if id, ok := ts.Type.(*ast.Ident); ok && (id.Name == "string" || ts.Assign != 0 && id.Name == "Reason") {
				out[ts.Name.Name] = true
			}
		}
	}
	return out
}

func typeName(e ast.Expr) string {
	if e == nil {
		return ""
	}
	return exprString(e)
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.BasicLit:
		return e.Value
	}
	return fmt.Sprintf("%T", e)
}

func closeWithCalls(f *ast.File) []*ast.CallExpr {
	var out []*ast.CallExpr
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if ok && exprString(call.Fun) == "closeWith" && len(call.Args) == 3 {
			out = append(out, call)
		}
		return true
	})
	return out
}

func closeCodeOf(e ast.Expr) (int, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		n, err := strconv.Atoi(e.Value)
		return n, err == nil
	case *ast.SelectorExpr:
		n, ok := wsCloseCodes[e.Sel.Name]
		return n, ok && exprString(e.X) == "websocket"
	}
	return 0, false
}
