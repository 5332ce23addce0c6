package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// TestSCCsSeparateCyclesFromLayers: a, b and c reach each other (one
// cycle), d only reaches into it and e stands alone; the cycle's three
// files share a component, d and e each have their own.
func TestSCCsSeparateCyclesFromLayers(t *testing.T) {
	graph := map[string]map[string]bool{
		"a.go": {"b.go": true},
		"b.go": {"c.go": true},
		"c.go": {"a.go": true},
		"d.go": {"a.go": true},
		"e.go": {},
	}
	comp := sccs(graph)
	if comp["a.go"] != comp["b.go"] || comp["b.go"] != comp["c.go"] {
		t.Errorf("a, b, c in components %d, %d, %d, want one", comp["a.go"], comp["b.go"], comp["c.go"])
	}
	if comp["d.go"] == comp["a.go"] || comp["e.go"] == comp["a.go"] || comp["d.go"] == comp["e.go"] {
		t.Errorf("components %v: want d and e each apart from the cycle and from each other", comp)
	}
}

// TestLongestFuncCountsFromFuncToBrace: the longest declaration wins and is
// named with its receiver; a one-line function is 1 line.
func TestLongestFuncCountsFromFuncToBrace(t *testing.T) {
	const src = `package p

type T struct{}

func short() {}

func (t *T) long() {
	_ = 1
	_ = 2
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	name, n := longestFunc(fset, []*ast.File{f})
	if name != "x.go:T.long" || n != 4 {
		t.Errorf("longest %s, %d lines; want x.go:T.long, 4", name, n)
	}
}

// TestExtauthzRoomsReadBottomUp: every room under extauthz/internal/ keeps
// its files free of cycles (0 references back up), as docs/rooms.md
// says (the scan must find at least 17 packages there: the rooms and
// kubewatch).
func TestExtauthzRoomsReadBottomUp(t *testing.T) {
	roomsReadBottomUp(t, "extauthz/internal", 17)
}

// TestBridgeRoomsReadBottomUp: every room under bridge/internal/ (the
// WebSocket frame format, the revocation client, the metrics re-export,
// the session listing, the identity signature check, the per-peer limits,
// the socket system calls) keeps its files free of cycles (0 references
// back up), as docs/rooms.md says.
func TestBridgeRoomsReadBottomUp(t *testing.T) {
	roomsReadBottomUp(t, "bridge/internal", 7)
}

// roomsReadBottomUp measures every package under dir (at least atLeast of
// them) and fails for each reference that runs back up.
func roomsReadBottomUp(t *testing.T, dir string, atLeast int) {
	t.Helper()
	if testing.Short() {
		t.Skip("type-checks " + dir + "/ from export data")
	}
	rooms, err := measureAll([]string{"github.com/wirekube/relay-ws/" + dir + "/..."})
	if err != nil {
		t.Fatal(err)
	}
	if len(rooms) < atLeast {
		t.Fatalf("measured %d packages under %s/, want at least %d", len(rooms), dir, atLeast)
	}
	for _, r := range rooms {
		if r.backUp != 0 {
			t.Errorf("%s: %d references run back up: %v", r.path, r.backUp, r.upEdges)
		}
	}
}
