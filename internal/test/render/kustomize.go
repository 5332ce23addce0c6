package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/wirekube/relay-ws/internal/test/gotool"
)

// The kustomize release the manifests are rendered with when no kustomize is
// given. Installed from the Go module proxy with `go install module@version`,
// which ignores this repository's go.mod.
const (
	KustomizeModule  = "sigs.k8s.io/kustomize/kustomize/v5"
	KustomizeVersion = "v5.5.0"
)

// Environment variables that choose the renderer.
const (
	// EnvKustomize names a kustomize binary (a path or a name on PATH). When
	// set, nothing else is tried, and a missing binary is an error.
	EnvKustomize = "KUSTOMIZE"
	// EnvKubectl names the kubectl binary. Unset: "kubectl" looked up on
	// PATH. Set and empty (KUBECTL=): kubectl is never used.
	EnvKubectl = "KUBECTL"
)

// ModulePath is this repository's Go module; its go.mod marks the repository
// root, under which bin/kustomize is cached.
const ModulePath = "github.com/wirekube/relay-ws"

// Kustomize renders dir (a kustomization directory) and returns the YAML
// stream. The renderer is chosen by ResolveKustomize. Safe for concurrent use,
// also by several processes: the install writes through a rename.
func Kustomize(ctx context.Context, dir string) ([]byte, error) {
	argv, err := ResolveKustomize(ctx)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], dir)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kustomize: %s %s: %w: %s", strings.Join(argv, " "), dir, err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// ResolveKustomize returns the command (argv without the directory) that
// renders a kustomization, in this order:
//
//  1. $KUSTOMIZE, if set;
//  2. <repo>/bin/kustomize, if it is the pinned KustomizeVersion (a cache: it
//     is preferred to kubectl so that results do not depend on the kubectl
//     version);
//  3. `kubectl kustomize`, with $KUBECTL or kubectl on PATH (KUBECTL= disables);
//  4. the pinned kustomize, installed into <repo>/bin by `go install`.
//
// The repository root is the nearest directory above the working directory
// whose go.mod declares ModulePath.
func ResolveKustomize(ctx context.Context) ([]string, error) {
	r := resolver{getenv: os.LookupEnv, lookPath: exec.LookPath}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	r.binDir = filepath.Join(root, "bin")
	return r.resolve(ctx)
}

// resolver holds what resolution reads from the environment, so that tests
// can replace it.
type resolver struct {
	getenv   func(string) (string, bool)
	lookPath func(string) (string, error)
	binDir   string
	// install builds the pinned kustomize into binDir; nil means goInstall.
	install func(ctx context.Context, binDir string) error
	// pinned reports whether a binary is the pinned kustomize; nil means
	// isPinned.
	pinned func(path string) bool
}

func (r resolver) resolve(ctx context.Context) ([]string, error) {
	if k, ok := r.getenv(EnvKustomize); ok && k != "" {
		p, err := r.lookPath(k)
		if err != nil {
			return nil, fmt.Errorf("kustomize: $%s=%q: %w", EnvKustomize, k, err)
		}
		return []string{p, "build"}, nil
	}
	isPin := r.pinned
	if isPin == nil {
		isPin = isPinned
	}
	pinned := filepath.Join(r.binDir, "kustomize")
	if isPin(pinned) {
		return []string{pinned, "build"}, nil
	}
	if k, ok := r.kubectl(); ok {
		return []string{k, "kustomize"}, nil
	}
	install := r.install
	if install == nil {
		install = goInstall
	}
	if err := install(ctx, r.binDir); err != nil {
		return nil, err
	}
	if !isPin(pinned) {
		return nil, fmt.Errorf("kustomize: %s is not %s@%s after install", pinned, KustomizeModule, KustomizeVersion)
	}
	return []string{pinned, "build"}, nil
}

// kubectl returns the kubectl to use, if any.
func (r resolver) kubectl() (string, bool) {
	name, set := r.getenv(EnvKubectl)
	if set && name == "" {
		return "", false
	}
	if !set {
		name = "kubectl"
	}
	p, err := r.lookPath(name)
	return p, err == nil
}

// isPinned reports whether path is the pinned kustomize.
func isPinned(path string) bool { return gotool.Pinned(path, KustomizeModule, KustomizeVersion) }

// goInstall installs the pinned kustomize into binDir/kustomize.
func goInstall(ctx context.Context, binDir string) error {
	_, err := gotool.Install(ctx, KustomizeModule, KustomizeVersion, binDir)
	return err
}

// errNoRepo means no go.mod of ModulePath lies above the working directory.
var errNoRepo = errors.New("render: not inside the " + ModulePath + " repository")

// repoRoot walks up from the working directory to the go.mod of ModulePath.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("render: %w", err)
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declares(data, ModulePath) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errNoRepo
		}
		dir = parent
	}
}

// declares reports whether go.mod data has the line `module path`.
func declares(gomod []byte, path string) bool {
	for line := range strings.Lines(string(gomod)) {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == path {
			return true
		}
	}
	return false
}
