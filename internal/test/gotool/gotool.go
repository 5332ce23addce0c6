// Package gotool installs pinned Go programs from the Go module proxy into a
// cache directory, for tests and tools that need a binary this repository
// does not vendor (kustomize, helm). `go install pkg@version` builds the
// program's own module graph and ignores this repository's go.mod.
package gotool

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
)

var majorSuffix = regexp.MustCompile(`^v[0-9]+$`)

// BinaryName is the file name `go install` gives the program at pkg: its
// last path element, or the one before a major version suffix (/v5).
func BinaryName(pkg string) string {
	name := path.Base(pkg)
	if majorSuffix.MatchString(name) {
		name = path.Base(path.Dir(pkg))
	}
	return name
}

// Pinned reports whether the binary at file was built from package pkg at
// version. It reads the Go build info, not a version subcommand (which
// prints "(devel)" for some `go install` builds).
func Pinned(file, pkg, version string) bool {
	info, err := buildinfo.ReadFile(file)
	return err == nil && info.Path == pkg && info.Main.Version == version
}

// Install builds pkg@version into dir/BinaryName(pkg). It builds into a
// fresh directory and renames, so a concurrent caller (another test process)
// never runs a half-written binary. GOFLAGS and GOWORK are cleared so that
// neither a -mod flag nor a workspace of the caller leaks into the build.
func Install(ctx context.Context, pkg, version, dir string) (string, error) {
	name := BinaryName(pkg)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	tmp, err := os.MkdirTemp(dir, "."+name+"-")
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	defer os.RemoveAll(tmp)
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("%s: go is needed to install %s@%s: %w", name, pkg, version, err)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, goBin, "install", pkg+"@"+version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=", "GOWORK=off")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: go install %s@%s: %w: %s", name, pkg, version, err, stderr.String())
	}
	file := filepath.Join(dir, name)
	if err := os.Rename(filepath.Join(tmp, name), file); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return file, nil
}
