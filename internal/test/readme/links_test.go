package readme

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	idAnchor = regexp.MustCompile(`<a id="([^"]+)"></a>`)
	heading  = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	notSlug  = regexp.MustCompile(`[^a-z0-9 _-]`)
)

// anchors returns the link targets of a Markdown page: its <a id>s and
// the GitHub slugs of its headings (lowercase, punctuation dropped,
// spaces as hyphens).
func anchors(page string) map[string]bool {
	out := map[string]bool{}
	for _, m := range idAnchor.FindAllStringSubmatch(page, -1) {
		out[m[1]] = true
	}
	for _, m := range heading.FindAllStringSubmatch(page, -1) {
		out[strings.ReplaceAll(notSlug.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")] = true
	}
	return out
}

// checkLinks fails on a relative link of the page at rel (from the
// repository root) whose file does not exist, or whose #anchor is not in
// the Markdown file it points to. It returns the files linked.
func checkLinks(t *testing.T, root, rel string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		if file == "" {
			file = path.Base(rel)
		}
		file = path.Join(path.Dir(rel), file)
		linked[file] = true
		page, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Errorf("%s links %s: no such file", rel, target)
			continue
		}
		if anchor != "" && strings.HasSuffix(file, ".md") && !anchors(string(page))[anchor] {
			t.Errorf("%s links %s: %s has no anchor %q", rel, target, file, anchor)
		}
	}
	return linked
}

// TestDocsIndexNamesEveryDocument: docs/README.md links every page of
// docs/, and every relative link of every page of docs/, of the README,
// CHANGELOG and SECURITY reaches an existing file and anchor.
func TestDocsIndexNamesEveryDocument(t *testing.T) {
	root := repoRoot(t)
	linked := checkLinks(t, root, "docs/README.md")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		checkLinks(t, root, "docs/"+filepath.Base(p))
	}
	for _, p := range []string{"README.md", "CHANGELOG.md", "SECURITY.md"} {
		checkLinks(t, root, p)
	}
	if len(pages) < 10 {
		t.Fatalf("found only %d pages in docs/", len(pages))
	}
	for _, p := range pages {
		rel := "docs/" + filepath.Base(p)
		if rel != "docs/README.md" && !linked[rel] {
			t.Errorf("docs/README.md does not link %s: add it to the index (and to the task it serves)", rel)
		}
	}
}
