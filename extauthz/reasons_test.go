package extauthz

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
)

// contractDenyReasons reads every Reason* constant of internal/contract
// (the deny reasons; Close* and Result* are not answered before an upgrade)
// from its source, so a reason added there is checked here without any list
// in this package naming it.
func contractDenyReasons(t *testing.T) map[contract.Reason]bool {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("../internal/contract/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("internal/contract sources: %v", err)
	}
	out := map[contract.Reason]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Reason" {
					continue
				}
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Reason") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s: value is not a literal", n.Name)
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[contract.Reason(v)] = true
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no Reason* constants found in internal/contract")
	}
	return out
}

// specExtauthzReasons reads the deny reasons whose "answered by" cell in
// docs/spec.md#deny-reasons names extauthz.
func specExtauthzReasons(t *testing.T) []contract.Reason {
	t.Helper()
	spec, err := os.ReadFile("../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(spec)
	i := strings.Index(text, `<a id="deny-reasons"></a>`)
	if i < 0 {
		t.Fatal("docs/spec.md: no deny-reasons anchor")
	}
	var out []contract.Reason
	inTable := false
	for _, line := range strings.Split(text[i:], "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			continue
		}
		code := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if code == "code" || strings.HasPrefix(code, "-") {
			continue
		}
		for _, who := range strings.Split(cells[2], ",") {
			if strings.TrimSpace(who) == "extauthz" {
				out = append(out, contract.Reason(code))
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("docs/spec.md: no deny reason answered by extauthz")
	}
	return out
}

// coveredElsewhere: reasons whose setup does not fit the Check table, and
// the test of this package that must ask for them by name.
var coveredElsewhere = map[contract.Reason]string{
	// Needs a TokenReview held open while a second check arrives.
	contract.ReasonReviewThrottled: "TestReviewThrottled",
	// Needs a live binding on a revocation stream of the hub.
	contract.ReasonKeyHeldByOtherBinding: "TestKeyHeldByOtherBinding",
	// Needs a key moved between two WireKubePeers through the informer.
	contract.ReasonPeerKeyMoved: "TestKeyMovedRefusedAtCheck",
}

// testMentions reports whether the test function name in this package's
// _test.go files refers to the contract constant with value r.
func testMentions(t *testing.T, name string, r contract.Reason) bool {
	t.Helper()
	fset := token.NewFileSet()
	files, _ := filepath.Glob("*_test.go")
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name != name {
				continue
			}
			found := false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if ok && sel.Sel.Name == constName(t, r) {
					found = true
				}
				return !found
			})
			return found
		}
	}
	return false
}

// constName finds the name of the internal/contract constant whose value is r.
func constName(t *testing.T, r contract.Reason) string {
	t.Helper()
	src, err := os.ReadFile("../internal/contract/contract.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(src), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[1] == "Reason" && f[2] == "=" && f[3] == strconv.Quote(string(r)) {
			return f[0]
		}
	}
	t.Fatalf("internal/contract: no constant for %s", r)
	return ""
}

// TestCheckCoversEveryReason fails when a deny reason docs/spec.md says
// extauthz answers is not a contract constant, or has no case in the Check
// table (nor a named test that asks for it).
func TestCheckCoversEveryReason(t *testing.T) {
	inContract := contractDenyReasons(t)
	covered := map[contract.Reason]bool{}
	for _, tc := range checkCases() {
		covered[tc.reason] = true
	}
	for _, r := range specExtauthzReasons(t) {
		if !inContract[r] {
			t.Errorf("docs/spec.md says extauthz answers %s, internal/contract has no Reason constant for it", r)
			continue
		}
		if covered[r] {
			continue
		}
		if name, ok := coveredElsewhere[r]; ok && testMentions(t, name, r) {
			continue
		}
		t.Errorf("no Check case for %s", r)
	}
}
