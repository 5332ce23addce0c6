package readme

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mappedBinaries are the binaries whose every flag the map names: the two
// services a request passes through.
var mappedBinaries = []string{"wirekube-extauthz", "wirekube-bridge"}

// TestArchitectureNamesEveryCodeFlagAndPackage: docs/architecture.md names
// every reason and result code of the contract (in backticks), every flag
// of the two services (as --flag) and every top-level Go package (its
// folder, as `folder/...`), so a map that fell behind the code fails here
// instead of sending a reader to a page that never mentions what they met.
// TestArchitectureNamesWhatExists holds the other direction.
func TestArchitectureNamesEveryCodeFlagAndPackage(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, architecturePath))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	codes := scanCodes(t, root)
	if len(codes) < 40 {
		t.Fatalf("found only %d codes: the scanner is broken", len(codes))
	}
	for _, c := range codes {
		if !strings.Contains(doc, "`"+c.value+"`") {
			t.Errorf("%s does not name the code `%s` (%s, %s)", architecturePath, c.value, c.name, c.file)
		}
	}
	flags := binaryFlags(t, root)
	for _, bin := range mappedBinaries {
		for _, f := range flags[bin] {
			if !mentionsFlag(doc, f.name) {
				t.Errorf("%s does not name %s's flag --%s", architecturePath, bin, f.name)
			}
		}
	}
	for _, dir := range topPackages(t, root) {
		if !strings.Contains(doc, "`"+dir+"/") {
			t.Errorf("%s does not name the package %s/ (as `%s/` or a file in it)", architecturePath, dir, dir)
		}
	}
}

// mentionsFlag: --name appears, not as the start of a longer flag's name.
func mentionsFlag(doc, name string) bool {
	for rest := doc; ; {
		i := strings.Index(rest, "--"+name)
		if i < 0 {
			return false
		}
		rest = rest[i+2+len(name):]
		if rest == "" || !isFlagChar(rest[0]) {
			return true
		}
	}
}

func isFlagChar(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// topPackages returns the folders holding a non-test Go package directly
// under the root or under internal/ (internal/test holds the harness, which
// docs/testing.md maps), from git's index.
func topPackages(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	for _, abs := range goFiles(t, root) {
		f, err := filepath.Rel(root, abs)
		if err != nil {
			t.Fatal(err)
		}
		f = filepath.ToSlash(f)
		dir := path.Dir(f)
		if strings.HasSuffix(f, "_test.go") || dir == "." {
			continue
		}
		parts := strings.Split(dir, "/")
		top := parts[0] == dir || len(parts) == 2 && parts[0] == "internal" && parts[1] != "test"
		if top && !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	if len(dirs) < 5 {
		t.Fatalf("found only %d top-level packages: %v", len(dirs), dirs)
	}
	slices.Sort(dirs)
	return dirs
}

func TestMentionsFlag(t *testing.T) {
	doc := "runs with --max-sessions-per-peer and `--drain`; see --unready-at."
	for _, c := range []struct {
		name string
		want bool
	}{
		{"max-sessions-per-peer", true}, {"drain", true}, {"unready-at", true},
		{"max-sessions", false}, {"max", false}, {"unready", false}, {"drain-rate", false},
	} {
		if got := mentionsFlag(doc, c.name); got != c.want {
			t.Errorf("mentionsFlag(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}
