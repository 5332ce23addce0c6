package extauthz

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/contractdoc"
)

// contractDenyReasons maps every Reason* constant of internal/contract
// (the deny reasons; Close* and Result* are not answered before an upgrade)
// to its name, read from its source, so a reason added there is checked
// here without any list in this package naming it.
func contractDenyReasons(t *testing.T) map[contract.Reason]string {
	t.Helper()
	out := map[contract.Reason]string{}
	for _, c := range contractdoc.Constants(t, "Reason") {
		if strings.HasPrefix(c.Name, "Reason") {
			out[contract.Reason(c.Value)] = c.Name
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
	var out []contract.Reason
	for _, r := range contractdoc.Spec(t).Table(t, "deny-reasons").Rows {
		for _, who := range strings.Split(r.Cell("answered by"), ",") {
			if strings.TrimSpace(who) == "extauthz" {
				out = append(out, contract.Reason(r.Code()))
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
	// Needs an address's failures past its bucket.
	contract.ReasonSourceRateLimited: "TestSourceFailureLimit",
	// Need the room of a full or draining bridge (--bridge-room-url).
	contract.ReasonAtCapacity: "TestFullRoomRefusedBeforeTokenReview",
	contract.ReasonDraining:   "TestFullRoomRefusedBeforeTokenReview",
}

// testMentions reports whether the test function name in this package's
// _test.go files refers to the contract constant constName.
func testMentions(t *testing.T, name, constName string) bool {
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
				if ok && sel.Sel.Name == constName {
					found = true
				}
				return !found
			})
			return found
		}
	}
	return false
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
		constName, ok := inContract[r]
		if !ok {
			t.Errorf("docs/spec.md says extauthz answers %s, internal/contract has no Reason constant for it", r)
			continue
		}
		if covered[r] {
			continue
		}
		if name, ok := coveredElsewhere[r]; ok && testMentions(t, name, constName) {
			continue
		}
		t.Errorf("no Check case for %s", r)
	}
}
