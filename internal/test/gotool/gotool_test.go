package gotool

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBinaryName(t *testing.T) {
	for pkg, want := range map[string]string{
		"sigs.k8s.io/kustomize/kustomize/v5":         "kustomize",
		"helm.sh/helm/v3/cmd/helm":                   "helm",
		"github.com/rhysd/actionlint/cmd/actionlint": "actionlint",
		"honnef.co/go/tools/cmd/staticcheck":         "staticcheck",
	} {
		if got := BinaryName(pkg); got != want {
			t.Errorf("BinaryName(%q) = %q, want %q", pkg, got, want)
		}
	}
}

// TestPinned reads the build info of this very test binary: its package is
// a test main, not a pinned tool, and a file that is no Go binary is never
// pinned.
func TestPinned(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if Pinned(self, "sigs.k8s.io/kustomize/kustomize/v5", "v5.5.0") {
		t.Error("the test binary passes for kustomize")
	}
	notGo := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(notGo, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if Pinned(notGo, "x", "v1") {
		t.Error("a shell script passes as pinned")
	}
}
