package manifests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pinnedUse is a step's action pinned by the full commit digest, with the
// version it is in a comment for the reader (and for update tools).
var pinnedUse = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40} # v[0-9]+\.[0-9]+\.[0-9]+$`)

// TestWorkflowActionsPinnedByDigest: every third-party action of every
// workflow (the release jobs sign and push with the repository's token and
// OIDC identity) is pinned by commit digest, never by a tag its owner can
// move; the repository's own workflows (./...) are exempt.
func TestWorkflowActionsPinnedByDigest(t *testing.T) {
	files, err := filepath.Glob("../.github/workflows/*.y*ml")
	if err != nil || len(files) < 2 {
		t.Fatalf("workflows: %v %v", files, err)
	}
	uses := regexp.MustCompile(`(?m)^\s*(?:-\s+)?uses:\s*(.+?)\s*$`)
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range uses.FindAllStringSubmatch(string(b), -1) {
			if strings.HasPrefix(m[1], "./") {
				continue
			}
			n++
			if !pinnedUse.MatchString(m[1]) {
				t.Errorf("%s: uses %q: pin it by its 40-hex commit with the version in a comment (owner/action@<sha> # vX.Y.Z)", filepath.Base(f), m[1])
			}
		}
	}
	if n < 10 {
		t.Fatalf("found only %d third-party actions: the parser is broken", n)
	}
}
