package manifests

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/version"
)

// devSuffix marks a tree between two releases: the next version with -dev,
// of which nothing is published (no tag, image or chart).
const devSuffix = "-dev"

// docsRef is the git ref whose docs describe the tree of release: its tag
// once released (the release workflow creates it), main for a -dev tree,
// which no tag names.
func docsRef(release string) string {
	if strings.HasSuffix(release, devSuffix) {
		return "main"
	}
	return release
}

// changelogHeads returns CHANGELOG.md's "## " headings, in order.
func changelogHeads(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	var heads []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "## ") {
			heads = append(heads, line)
		}
	}
	return heads
}

var (
	versionForm = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?$`)
	datedHead   = regexp.MustCompile(`^## \[(v[^\]]+)\] - \d{4}-\d{2}-\d{2}$`)
)

// core returns the major, minor and patch numbers of v (vX.Y.Z[-pre]).
func core(t *testing.T, v string) [3]int {
	t.Helper()
	m := versionForm.FindStringSubmatch(v)
	if m == nil {
		t.Fatalf("%q is no vMAJOR.MINOR.PATCH[-PRERELEASE]", v)
	}
	var n [3]int
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1])
	}
	return n
}

func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// TestVersionSaysWhatTheTreeIs: internal/version.Release (which the chart,
// manifests/base and `make build` pin, TestVersionPinned) is either a
// release whose dated CHANGELOG section is the newest, with nothing
// unreleased above it, or the next version's -dev, with an Unreleased
// section on top and no section of that version yet, above every release.
func TestVersionSaysWhatTheTreeIs(t *testing.T) {
	heads := changelogHeads(t)
	mustf(t, len(heads) > 0, "CHANGELOG.md has no ## section")
	rel := version.Release
	cur := core(t, rel)
	var newest string
	for _, h := range heads {
		if m := datedHead.FindStringSubmatch(h); m != nil {
			newest = m[1]
			break
		}
	}
	if !strings.HasSuffix(rel, devSuffix) {
		mustf(t, datedHead.MatchString(heads[0]) && newest == rel,
			"internal/version.Release is the release %s, but CHANGELOG.md's first section is %q: a release is the commit whose newest section is ## [%s] - YYYY-MM-DD, nothing unreleased above it; between releases the tree is the next version%s",
			rel, heads[0], rel, devSuffix)
		return
	}
	mustf(t, heads[0] == "## [Unreleased]", "internal/version.Release %s is a development version, CHANGELOG.md's first section is %q, want ## [Unreleased]", rel, heads[0])
	base := strings.TrimSuffix(rel, devSuffix)
	for _, h := range heads {
		mustf(t, !strings.HasPrefix(h, "## ["+base+"]"), "CHANGELOG.md has %q, yet the tree is still %s", h, rel)
	}
	mustf(t, newest == "" || less(core(t, newest), cur), "%s is not after the newest release %s", rel, newest)
}
