package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var readmeCodeRe = regexp.MustCompile("`([a-z0-9_]+)`")

// readmeCloseRows reads README.md's close-code table (first header cell
// "close code ..."): the close codes (0: none) each reason stands under.
func readmeCloseRows(t *testing.T, root string) map[string][]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int{}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "|") {
			if in {
				break
			}
			continue
		}
		cells := splitRow(line)
		switch {
		case strings.HasPrefix(cells[0], "close code"):
			in = true
		case !in || strings.HasPrefix(cells[0], "---") || len(cells) < 2:
		default:
			codes := parseCloseCell(cells[0])
			if len(codes) != 1 {
				t.Fatalf("README.md close-code row %q: want one close code (or none)", cells[0])
			}
			for _, m := range readmeCodeRe.FindAllStringSubmatch(cells[1], -1) {
				if !slices.Contains(out[m[1]], codes[0]) {
					out[m[1]] = append(out[m[1]], codes[0])
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("README.md: no close-code table found")
	}
	return out
}

// TestReadmeCloseCodesMatchTheSpec: each close reason stands in README.md's
// close-code table under exactly the close codes of its docs/spec.md row
// (none included), and a deny reason there only under 1008 and only if
// docs/spec.md says a revoked session closes with it.
func TestReadmeCloseCodesMatchTheSpec(t *testing.T) {
	root := repoRoot(t)
	readme := readmeCloseRows(t, root)
	spec := map[string][]int{}
	for _, r := range parseSpecTables(t, filepath.Join(root, specPath)) {
		if r.anchor == "close-reasons" {
			spec[r.code] = parseCloseCell(r.close)
		}
	}
	revoked := specRevocationReasons(t, root)
	for code, want := range spec {
		got := slices.Clone(readme[code])
		slices.Sort(got)
		want = slices.Clone(want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("README.md lists `%s` under close codes %v, docs/spec.md#close-reasons under %v (0: none)", code, got, want)
		}
	}
	for code, got := range readme {
		if _, ok := spec[code]; ok {
			continue
		}
		if !revoked[code] || !slices.Equal(got, []int{1008}) {
			t.Errorf("README.md lists `%s` under close codes %v: not a close reason of docs/spec.md, nor a revocation deny reason under 1008", code, got)
		}
	}
}

// specRevocationReasons reads the deny reasons docs/spec.md says a revoked
// session closes with: the paragraph below the close-reasons table, "A
// session extauthz revokes ... closes with 1008 and that rule's deny reason:
// `pod_not_found`, ... ([docs/revocation.md](revocation.md))".
func specRevocationReasons(t *testing.T, root string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, specPath))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(b)), " ")
	i := strings.Index(text, "A session extauthz revokes")
	if i < 0 {
		t.Fatalf("%s: no paragraph on the close reasons of a revoked session", specPath)
	}
	para, _, ok := strings.Cut(text[i:], "([docs/revocation.md]")
	if !ok || !strings.Contains(para, "closes with 1008") {
		t.Fatalf("%s: the revocation paragraph changed shape: %.200q", specPath, para)
	}
	out := map[string]bool{}
	for _, m := range readmeCodeRe.FindAllStringSubmatch(para, -1) {
		out[m[1]] = true
	}
	if len(out) == 0 {
		t.Fatalf("%s: no deny reasons in the revocation paragraph", specPath)
	}
	return out
}
