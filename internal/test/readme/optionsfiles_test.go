package readme

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestOptionsFilesFollowOneRule: in both services (extauthz/, bridge/ and
// their rooms) the type whose AddFlags registers flags lives in a file
// named options.go or <topic>_options.go, so a reader finds every flag by
// file name.
func TestOptionsFilesFollowOneRule(t *testing.T) {
	root := repoRoot(t)
	var checked int
	for _, dir := range []string{"extauthz", "bridge"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			for _, typ := range addFlagsReceivers(t, path) {
				checked++
				base := filepath.Base(rel)
				if base == "options.go" || strings.HasSuffix(base, "_options.go") {
					continue
				}
				t.Errorf("%s: %s.AddFlags is in a file not named options.go or <topic>_options.go", rel, typ)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 8 {
		t.Fatalf("found only %d AddFlags methods in extauthz/ and bridge/: the scan is broken", checked)
	}
}

// addFlagsReceivers returns the receiver type of each AddFlags method
// declared in the file at path.
func addFlagsReceivers(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || fn.Name.Name != "AddFlags" || len(fn.Recv.List) == 0 {
			continue
		}
		typ := fn.Recv.List[0].Type
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		if id, ok := typ.(*ast.Ident); ok {
			out = append(out, id.Name)
		}
	}
	return out
}
