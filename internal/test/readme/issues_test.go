package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// issueRef is a reference to the project's own issue tracker by number
// ("issue 22", "issues 20 and 23", "issue #7").
var issueRef = regexp.MustCompile(`(?i)\bissues? #?\d+`)

// TestDocsSpeakOfTheProject: the README, CHANGELOG, SECURITY and docs/
// say what the gateway does, not which tracker issue asked for it: a
// reader outside the tracker cannot follow "(issue 22)".
func TestDocsSpeakOfTheProject(t *testing.T) {
	root := repoRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"README.md", "CHANGELOG.md", "SECURITY.md"} {
		pages = append(pages, filepath.Join(root, p))
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		for i, line := range strings.Split(string(b), "\n") {
			if m := issueRef.FindString(line); m != "" {
				t.Errorf("%s:%d names %q: say what changed or what it is for instead", rel, i+1, m)
			}
		}
	}
}
