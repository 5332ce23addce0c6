package main

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// listed is the part of `go list -json` this tool reads.
type listed struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	DepOnly    bool
	Name       string
}

// room is the measure of one package.
type room struct {
	path        string
	files       int
	edges       int
	backUp      int
	largestSCC  int
	longestFunc string
	longest     int
	upEdges     []string
}

// measure type-checks one package and measures its file graph and its
// longest function.
func measure(p listed, exports map[string]string) (room, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
		if err != nil {
			return room{}, err
		}
		files = append(files, f)
	}
	lookup := func(path string) (io.ReadCloser, error) {
		exp, ok := exports[path]
		if !ok || exp == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exp)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	pkg, err := conf.Check(p.ImportPath, fset, files, info)
	if err != nil {
		return room{}, err
	}
	graph := fileGraph(fset, pkg, info)
	r := room{path: p.ImportPath, files: len(files)}
	for _, to := range graph {
		r.edges += len(to)
	}
	comp := sccs(graph)
	for from, to := range graph {
		for t := range to {
			if comp[from] == comp[t] {
				r.backUp++
				r.upEdges = append(r.upEdges, filepath.Base(from)+" -> "+filepath.Base(t))
			}
		}
	}
	sort.Strings(r.upEdges)
	size := map[int]int{}
	for _, c := range comp {
		size[c]++
		r.largestSCC = max(r.largestSCC, size[c])
	}
	r.longestFunc, r.longest = longestFunc(fset, files)
	return r, nil
}

// fileGraph returns, for each file, the other files of the package whose
// symbols it uses.
func fileGraph(fset *token.FileSet, pkg *types.Package, info *types.Info) map[string]map[string]bool {
	graph := map[string]map[string]bool{}
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		if parent := obj.Parent(); parent != nil && parent != pkg.Scope() {
			continue // a local name
		}
		from := fset.Position(id.Pos()).Filename
		to := fset.Position(obj.Pos()).Filename
		if graph[from] == nil {
			graph[from] = map[string]bool{}
		}
		if from != to {
			graph[from][to] = true
		}
	}
	return graph
}

// sccs labels each file with its strongly connected component (Tarjan).
func sccs(graph map[string]map[string]bool) map[string]int {
	index, low, comp := map[string]int{}, map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	next, label := 0, 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range sortedKeys(graph[v]) {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			comp[w] = label
			if w == v {
				break
			}
		}
		label++
	}
	for _, v := range sortedKeys(graph) {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	return comp
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// longestFunc returns the longest function declaration, in lines.
func longestFunc(fset *token.FileSet, files []*ast.File) (string, int) {
	name, longest := "", 0
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if n > longest {
				name, longest = funcName(fset, fn), n
			}
		}
	}
	return name, longest
}

func funcName(fset *token.FileSet, fn *ast.FuncDecl) string {
	file := filepath.Base(fset.Position(fn.Pos()).Filename)
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return file + ":" + fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return file + ":" + id.Name + "." + fn.Name.Name
	}
	return file + ":" + fn.Name.Name
}
