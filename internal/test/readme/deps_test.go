package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// directRequires returns the modules go.mod requires directly (every
// require line without "// indirect").
func directRequires(t *testing.T, gomod string) []string {
	t.Helper()
	var mods []string
	inBlock := false
	for _, line := range strings.Split(gomod, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "require (":
			inBlock = true
			continue
		case inBlock && line == ")":
			inBlock = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !inBlock:
			continue
		}
		if f := strings.Fields(line); len(f) >= 2 && !strings.Contains(line, "// indirect") {
			mods = append(mods, f[0])
		}
	}
	return mods
}

// TestArchitectureExplainsEveryDependency: every module go.mod requires
// directly has a row in docs/architecture.md's dependency table (its
// first cell names it in backticks), which says why it is there.
func TestArchitectureExplainsEveryDependency(t *testing.T) {
	root := repoRoot(t)
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, architecturePath))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n## Dependencies and why\n")
	if !ok {
		t.Fatalf("%s has no ## Dependencies and why section", architecturePath)
	}
	if i := strings.Index(table, "\n## "); i >= 0 {
		table = table[:i]
	}
	named := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 {
			for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[1], -1) {
				named[m[1]] = true
			}
		}
	}
	mods := directRequires(t, string(gomod))
	if len(mods) < 10 {
		t.Fatalf("found only %d direct requirements in go.mod: the parser is broken", len(mods))
	}
	for _, m := range mods {
		if !named[m] {
			t.Errorf("go.mod requires %s directly; %s's dependency table has no row saying why", m, architecturePath)
		}
	}
}
