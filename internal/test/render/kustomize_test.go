package render

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestResolveKustomize: the renderer order ($KUSTOMIZE, pinned bin/kustomize,
// kubectl, install) with fake environments; no program is run.
func TestResolveKustomize(t *testing.T) {
	const binDir = "/repo/bin"
	pinnedBin := filepath.Join(binDir, "kustomize")
	errInstall := errors.New("proxy unreachable")
	for _, tc := range []struct {
		name      string
		env       map[string]string
		onPath    []string // names lookPath finds, as /usr/bin/<name>
		pinned    bool     // bin/kustomize is the pinned version before install
		installed bool     // install produces the pinned version
		installFn error    // install returns this
		want      []string
		wantErr   string
		wantBuild bool
	}{
		{name: "env_kustomize_first", env: map[string]string{EnvKustomize: "kustomize"}, onPath: []string{"kustomize", "kubectl"},
			pinned: true, want: []string{"/usr/bin/kustomize", "build"}},
		{name: "env_kustomize_missing_is_error", env: map[string]string{EnvKustomize: "nope"}, onPath: []string{"kubectl"},
			pinned: true, wantErr: "$KUSTOMIZE"},
		{name: "empty_env_kustomize_ignored", env: map[string]string{EnvKustomize: ""}, onPath: []string{"kubectl"},
			want: []string{"/usr/bin/kubectl", "kustomize"}},
		{name: "pinned_before_kubectl", onPath: []string{"kubectl"}, pinned: true, want: []string{pinnedBin, "build"}},
		{name: "kubectl_when_no_pinned", onPath: []string{"kubectl"}, want: []string{"/usr/bin/kubectl", "kustomize"}},
		{name: "env_kubectl_names_it", env: map[string]string{EnvKubectl: "kubectl-1.37"}, onPath: []string{"kubectl", "kubectl-1.37"},
			want: []string{"/usr/bin/kubectl-1.37", "kustomize"}},
		{name: "env_kubectl_empty_disables", env: map[string]string{EnvKubectl: ""}, onPath: []string{"kubectl"},
			installed: true, want: []string{pinnedBin, "build"}, wantBuild: true},
		{name: "install_without_kubectl", installed: true, want: []string{pinnedBin, "build"}, wantBuild: true},
		{name: "install_error", installFn: errInstall, wantErr: "proxy unreachable", wantBuild: true},
		{name: "install_wrong_version", wantErr: "is not " + KustomizeModule + "@" + KustomizeVersion, wantBuild: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			built := false
			r := resolver{
				binDir: binDir,
				getenv: func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok },
				lookPath: func(name string) (string, error) {
					if slices.Contains(tc.onPath, name) {
						return "/usr/bin/" + name, nil
					}
					return "", errors.New("not found")
				},
				pinned: func(p string) bool { return p == pinnedBin && (tc.pinned || built && tc.installed) },
				install: func(_ context.Context, dir string) error {
					mustf(t, dir == binDir, "install into %s, want %s", dir, binDir)
					built = true
					return tc.installFn
				},
			}
			got, err := r.resolve(t.Context())
			mustf(t, built == tc.wantBuild, "installed %v, want %v", built, tc.wantBuild)
			if tc.wantErr != "" {
				mustf(t, err != nil && strings.Contains(err.Error(), tc.wantErr), "err %v, want one containing %q", err, tc.wantErr)
				return
			}
			mustf(t, err == nil && slices.Equal(got, tc.want), "got %v, %v; want %v", got, err, tc.want)
		})
	}
}

// TestIsPinned: a file that is not a Go binary, or a Go binary of another
// module (this test binary), is not the pinned kustomize.
func TestIsPinned(t *testing.T) {
	text := filepath.Join(t.TempDir(), "kustomize")
	if err := os.WriteFile(text, []byte("#!/bin/sh\necho v5.5.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{text, self, filepath.Join(t.TempDir(), "missing")} {
		mustf(t, !isPinned(p), "%s reported as the pinned kustomize", p)
	}
}

func TestDeclares(t *testing.T) {
	for _, tc := range []struct {
		gomod string
		want  bool
	}{
		{"module " + ModulePath + "\n\ngo 1.26\n", true},
		{"// comment\nmodule \"" + ModulePath + "\"\n", true},
		{"module " + ModulePath + "/e2e/kubebin\n", false},
		{"go 1.26\n", false},
	} {
		mustf(t, declares([]byte(tc.gomod), ModulePath) == tc.want, "declares(%q) != %v", tc.gomod, tc.want)
	}
}

// TestRepoRoot: run from internal/test/render/, the root is three levels up.
func TestRepoRoot(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	mustf(t, root == filepath.Dir(filepath.Dir(filepath.Dir(wd))), "repo root %s, want three levels above %s", root, wd)
}

// TestResolveKustomizeHere: the renderer this machine uses is an absolute,
// executable path (run with -v to see which one).
func TestResolveKustomizeHere(t *testing.T) {
	argv, err := ResolveKustomize(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("renderer: %s", strings.Join(argv, " "))
	fi, err := os.Stat(argv[0])
	mustf(t, err == nil && filepath.IsAbs(argv[0]) && fi.Mode()&0o111 != 0, "renderer %s is not an executable absolute path: %v", argv[0], err)
	mustf(t, len(argv) == 2 && (argv[1] == "build" || argv[1] == "kustomize"), "renderer argv %v", argv)
}

func mustf(t *testing.T, cond bool, format string, args ...any) {
	t.Helper()
	if !cond {
		t.Fatalf(format, args...)
	}
}
