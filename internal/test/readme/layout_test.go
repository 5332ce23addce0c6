package readme

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// architecturePath is the document with the layout table.
const architecturePath = "docs/architecture.md"

// layoutFolders returns the folders the first column of the "## Layout"
// table of docs/architecture.md names (backticked, ending in /).
func layoutFolders(t *testing.T, doc string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n## Layout\n")
	if !ok {
		t.Fatalf("%s has no ## Layout section", architecturePath)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	var out []string
	folder := regexp.MustCompile("`([^`]+)/`")
	for line := range strings.Lines(rest) {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range folder.FindAllStringSubmatch(cells[1], -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// trackedFolders returns every top-level folder of the repository and
// every folder that holds a Go package, from git's index.
func trackedFolders(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range strings.Fields(string(out)) {
		dir := path.Dir(f)
		if dir == "." || strings.HasPrefix(f, ".") {
			continue
		}
		top, _, _ := strings.Cut(dir, "/")
		seen[top] = true
		if strings.HasSuffix(f, ".go") && !strings.Contains(dir, "testdata") {
			seen[dir] = true
		}
	}
	var dirs []string
	for d := range seen {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	return dirs
}

// covered: the table names dir, or dir is a cmd/<binary> folder (or its
// own cmd/ folder) of a folder the table names.
func covered(dir string, named map[string]bool) bool {
	if named[dir] {
		return true
	}
	if base, _, ok := strings.Cut(dir, "/cmd/"); ok && named[base] {
		return true
	}
	return strings.HasSuffix(dir, "/cmd") && named[strings.TrimSuffix(dir, "/cmd")]
}

// TestLayoutCoversEveryFolder: every top-level folder and every Go package
// folder is in docs/architecture.md's layout table (a binary's cmd/ folder
// by its parent), and every folder the table names exists. Fails when a
// package is added without a row, or a row outlives its folder.
func TestLayoutCoversEveryFolder(t *testing.T) {
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, architecturePath))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, d := range layoutFolders(t, string(doc)) {
		named[d] = true
		if st, err := os.Stat(filepath.Join(root, d)); err != nil || !st.IsDir() {
			t.Errorf("%s's layout names %s/, which is not a folder", architecturePath, d)
		}
	}
	if len(named) < 10 {
		t.Fatalf("found only %d folders in the layout table: the parser is broken", len(named))
	}
	for _, d := range trackedFolders(t, root) {
		if !covered(d, named) {
			t.Errorf("%s/ is not in %s's layout table: add a row (or name it in one)", d, architecturePath)
		}
	}
}
