// Package contractdoc is the one place the tests read the project's
// contract from: docs/spec.md's tables (by anchor), the silence range of
// ping_timeout as the documents state it, and the constants of
// internal/contract as its source declares them. Tests that compare the
// code with the contract call it instead of parsing on their own, so a
// change of the spec's layout is fixed once.
package contractdoc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// SpecPath is the contract document, relative to the repository root.
const SpecPath = "docs/spec.md"

// Root returns the repository root: the nearest folder above the working
// directory that holds go.mod.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("contractdoc: no go.mod above the working directory")
		}
		dir = up
	}
}

// Doc is a Markdown document split in lines.
type Doc struct {
	Path  string // relative to the repository root
	Lines []string
}

// Read reads the document at rel (relative to the repository root).
func Read(t testing.TB, rel string) *Doc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Root(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return Parse(rel, string(b))
}

// Spec reads docs/spec.md.
func Spec(t testing.TB) *Doc {
	t.Helper()
	return Read(t, SpecPath)
}

// Parse splits text (the document at path) in lines.
func Parse(path, text string) *Doc {
	return &Doc{Path: path, Lines: strings.Split(text, "\n")}
}

// Text is the whole document.
func (d *Doc) Text() string { return strings.Join(d.Lines, "\n") }

// anchorLine returns the index of the line holding <a id="anchor"></a>.
func (d *Doc) anchorLine(anchor string) (int, error) {
	tag := fmt.Sprintf(`<a id=%q></a>`, anchor)
	for i, l := range d.Lines {
		if strings.Contains(l, tag) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%s: no anchor %q", d.Path, anchor)
}

// errorf is an error about docs/spec.md.
func errorf(format string, args ...any) error {
	return fmt.Errorf(SpecPath+": "+format, args...)
}
