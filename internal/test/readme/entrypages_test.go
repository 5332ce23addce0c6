package readme

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// entryPageMaxBytes bounds each page docs/README.md sends a reader to: the
// reference a reader looks one thing up in (flags, checks, reason codes,
// metrics, procedures). History, superseded measurements and raw runs
// belong to docs/<page>-history.md, which is no entry page.
const entryPageMaxBytes = 64_000

// contentsFromBytes: an entry page at least this large opens with a
// contents list, within its first contentsWithinLines lines, linking every
// one of its "## " sections.
const (
	contentsFromBytes   = 20_000
	contentsWithinLines = 40
)

// entryPages returns the pages of docs/ that docs/README.md links, by
// name, except the history pages (docs/*-history.md).
func entryPages(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for f := range checkLinks(t, root, "docs/README.md") {
		if path.Dir(f) == "docs" && strings.HasSuffix(f, ".md") && !strings.HasSuffix(f, "-history.md") {
			out = append(out, f)
		}
	}
	if len(out) < 10 {
		t.Fatalf("docs/README.md links only %d entry pages: %v", len(out), out)
	}
	return out
}

// TestEntryPagesAtMost64KB: every page docs/README.md sends a reader to
// (history pages aside) is at most 64,000 bytes.
func TestEntryPagesAtMost64KB(t *testing.T) {
	root := repoRoot(t)
	for _, p := range entryPages(t, root) {
		fi, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > entryPageMaxBytes {
			t.Errorf("%s is %d bytes, over %d: move history and raw runs to %s, or a topic to a page of its own",
				p, fi.Size(), entryPageMaxBytes, strings.TrimSuffix(p, ".md")+"-history.md")
		}
	}
}

// TestEntryPagesOpenWithContents: every entry page of 20,000 bytes or more
// links each of its "## " sections within its first 40 lines.
func TestEntryPagesOpenWithContents(t *testing.T) {
	root := repoRoot(t)
	for _, p := range entryPages(t, root) {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < contentsFromBytes {
			continue
		}
		for _, missing := range missingFromContents(string(b), contentsWithinLines) {
			t.Errorf("%s: the first %d lines link no anchor of section %q", p, contentsWithinLines, missing)
		}
	}
}

// missingFromContents returns the "## " headings of page (outside fenced
// code) of which no anchor, the heading's own slug or an <a id> on the
// lines just above it, is linked as (#anchor) in the first n lines.
func missingFromContents(page string, n int) []string {
	lines := strings.Split(page, "\n")
	first := strings.Join(lines[:min(n, len(lines))], "\n")
	var missing []string
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(l, "## ") {
			continue
		}
		names := []string{slug(strings.TrimPrefix(l, "## "))}
		for j := i - 1; j >= 0; j-- {
			m := idAnchor.FindStringSubmatch(lines[j])
			if m == nil {
				break
			}
			names = append(names, m[1])
		}
		linked := false
		for _, a := range names {
			linked = linked || strings.Contains(first, fmt.Sprintf("(#%s)", a))
		}
		if !linked {
			missing = append(missing, strings.TrimPrefix(l, "## "))
		}
	}
	return missing
}

// slug is the GitHub anchor of a heading, as anchors computes it.
func slug(h string) string {
	return strings.ReplaceAll(notSlug.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
}

// TestMissingFromContents: a section linked by its slug or by the <a id>
// above it counts, one linked only after the first lines or not at all does
// not, and a "## " line inside fenced code is no section.
func TestMissingFromContents(t *testing.T) {
	page := "# P\n" +
		"Contents: [A](#a-b) [C](#cee)\n" +
		"\n" +
		"## A, b\n" +
		"<a id=\"cee\"></a>\n" +
		"## C\n" +
		"```\n" +
		"## not a section\n" +
		"```\n" +
		"## D\n" +
		"[late](#e)\n" +
		"## E\n"
	got := fmt.Sprint(missingFromContents(page, 3))
	if want := "[D E]"; got != want {
		t.Errorf("missing %s, want %s", got, want)
	}
}
