package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// codeRef is how docs/architecture.md names code: a repository path in
// backticks, optionally followed by ":" and a function of that file
// (`bridge/internal/peerlimit/limits.go:Limits.Acquire`, `bridge/internal/peerlimit/limits_test.go:TestPeerLimits`,
// `e2e/fronts_test.go:env.testFrontMatrix`, a subtest as `TestCheck/case`).
var codeRef = regexp.MustCompile("`([A-Za-z0-9_.-]+/[A-Za-z0-9_./-]*[A-Za-z0-9_-]\\.[a-z]+)(?::([A-Za-z0-9_]+(?:\\.[A-Za-z0-9_]+)?)(?:/[^`]*)?)?`")

// funcDecl matches the declaration of name in Go source: a function, or a
// method when recv is set (any receiver variable, pointer or not).
func funcDecl(recv, name string) *regexp.Regexp {
	if recv == "" {
		return regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(name) + `[\[(]`)
	}
	return regexp.MustCompile(`(?m)^func \(\w+ \*?` + regexp.QuoteMeta(recv) + `(?:\[[^\]]*\])?\) ` + regexp.QuoteMeta(name) + `\(`)
}

// TestArchitectureNamesWhatExists: every path docs/architecture.md names
// exists, and every function it names after a Go file's path is declared
// in that file, so the map cannot point at code that moved or was renamed.
func TestArchitectureNamesWhatExists(t *testing.T) {
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, architecturePath))
	if err != nil {
		t.Fatal(err)
	}
	paths, funcs := 0, 0
	for _, m := range codeRef.FindAllStringSubmatch(string(doc), -1) {
		file, fn := m[1], m[2]
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Errorf("%s names %s, which does not exist", architecturePath, file)
			continue
		}
		paths++
		if fn == "" {
			continue
		}
		if !strings.HasSuffix(file, ".go") {
			t.Errorf("%s names %s:%s: only a Go file's functions can be named", architecturePath, file, fn)
			continue
		}
		funcs++
		recv, name, ok := strings.Cut(fn, ".")
		if !ok {
			recv, name = "", fn
		}
		if !funcDecl(recv, name).Match(src) {
			t.Errorf("%s names %s:%s: no such function in %s", architecturePath, file, fn, file)
		}
	}
	if paths < 30 || funcs < 30 {
		t.Fatalf("%s: found only %d paths and %d functions: the parser is broken or the map is gone", architecturePath, paths, funcs)
	}
}

func TestFuncDecl(t *testing.T) {
	src := "func plain(a int) {}\nfunc (l *peerLimits) acquire(p string) {}\nfunc (d Decision) Allowed() bool\n" +
		"func generic[T any](t T) {}\n func indented() {}\n"
	for _, c := range []struct {
		recv, name string
		want       bool
	}{
		{"", "plain", true}, {"peerLimits", "acquire", true}, {"Decision", "Allowed", true}, {"", "generic", true},
		{"", "acquire", false}, {"peerLimits", "plain", false}, {"Decision", "Allow", false}, {"", "indented", false},
	} {
		if got := funcDecl(c.recv, c.name).MatchString(src); got != c.want {
			t.Errorf("funcDecl(%q, %q) matched %v, want %v", c.recv, c.name, got, c.want)
		}
	}
}
