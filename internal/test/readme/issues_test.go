package readme

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// issueRef is a reference to the project's own issue tracker by number
// ("issue 22", "issues 20 and 23", "issue #7").
var issueRef = regexp.MustCompile(`(?i)\bissues? #?\d+`)

// TestDocsSpeakOfTheProject: the README, CHANGELOG, SECURITY, docs/ and
// every Go file's comments say what the gateway does, not which tracker
// issue asked for it: a reader outside the tracker cannot follow
// "(issue 22)". This file is the one exception: it names the pattern.
func TestDocsSpeakOfTheProject(t *testing.T) {
	root := repoRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"README.md", "CHANGELOG.md", "SECURITY.md"} {
		pages = append(pages, filepath.Join(root, p))
	}
	pages = append(pages, goFiles(t, root)...)
	if len(pages) < 100 {
		t.Fatalf("found only %d documents and Go files: the listing is broken", len(pages))
	}
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		if rel == filepath.Join("internal", "test", "readme", "issues_test.go") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := issueRef.FindString(line); m != "" {
				t.Errorf("%s:%d names %q: say what changed or what it is for instead", rel, i+1, m)
			}
		}
	}
}

// goFiles lists the repository's Go files from git's index.
func goFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "*.go")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []string
	for _, f := range strings.Fields(string(out)) {
		files = append(files, filepath.Join(root, f))
	}
	return files
}
