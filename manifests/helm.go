package manifests

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The helm release the chart is linted and rendered with, built from the Go
// module proxy (`go install module@version` ignores this repository's
// go.mod) and cached by version under <repo>/e2e/.cache/helm/<version>/.
const (
	HelmModule  = "helm.sh/helm/v3/cmd/helm"
	HelmVersion = "v3.22.0"
	// HelmKubeVersion is the Kubernetes version `helm template` and
	// `helm lint` assume (a go-installed helm defaults to v1.20): the e2e
	// suite's kube-apiserver.
	HelmKubeVersion = "1.37.2"
)

// ChartPath is the chart, relative to the repository root.
const ChartPath = "charts/wirekube-relay-ws"

// EnvHelm names a helm binary (a path or a name on PATH) to use instead of
// the pinned one. A missing binary is an error.
const EnvHelm = "HELM"

// Helm runs helm with args (for example "template", "lint") and returns its
// standard output. Helm's own state (repositories, cache) goes to a fresh
// temporary directory, never the user's home.
func Helm(ctx context.Context, args ...string) ([]byte, error) {
	bin, err := ResolveHelm(ctx)
	if err != nil {
		return nil, err
	}
	home, err := os.MkdirTemp("", "wirekube-helm-")
	if err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	defer os.RemoveAll(home)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %w: %s%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.Bytes(), nil
}

// HelmTemplate renders chart as release "wirekube-relay-gateway" in
// namespace with extra helm arguments (for example "--set", "front=none").
func HelmTemplate(ctx context.Context, chart, namespace string, extra ...string) ([]byte, error) {
	args := append([]string{"template", "wirekube-relay-gateway", chart, "--namespace", namespace,
		"--kube-version", HelmKubeVersion}, extra...)
	return Helm(ctx, args...)
}

// ResolveHelm returns $HELM if set, else the pinned helm, installing it into
// the cache when it is missing.
func ResolveHelm(ctx context.Context) (string, error) {
	if h, ok := os.LookupEnv(EnvHelm); ok && h != "" {
		p, err := exec.LookPath(h)
		if err != nil {
			return "", fmt.Errorf("helm: $%s=%q: %w", EnvHelm, h, err)
		}
		return p, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "e2e", ".cache", "helm", HelmVersion)
	bin := filepath.Join(dir, "helm")
	if isPinnedHelm(bin) {
		return bin, nil
	}
	if err := installHelm(ctx, dir); err != nil {
		return "", err
	}
	if !isPinnedHelm(bin) {
		return "", fmt.Errorf("helm: %s is not %s@%s after install", bin, HelmModule, HelmVersion)
	}
	return bin, nil
}

func isPinnedHelm(path string) bool {
	info, err := buildinfo.ReadFile(path)
	return err == nil && info.Path == HelmModule && info.Main.Version == HelmVersion
}

// installHelm builds the pinned helm into dir/helm through a fresh
// directory and a rename, so a concurrent caller never runs a half-written
// binary. GOFLAGS and GOWORK are cleared: `go install m@v` builds m's own
// module graph.
func installHelm(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("helm: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, ".helm-")
	if err != nil {
		return fmt.Errorf("helm: %w", err)
	}
	defer os.RemoveAll(tmp)
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("helm: go is needed to install %s@%s: %w", HelmModule, HelmVersion, err)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, goBin, "install", HelmModule+"@"+HelmVersion)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=", "GOWORK=off")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("helm: go install %s@%s: %w: %s", HelmModule, HelmVersion, err, stderr.String())
	}
	if err := os.Rename(filepath.Join(tmp, "helm"), filepath.Join(dir, "helm")); err != nil {
		return fmt.Errorf("helm: %w", err)
	}
	return nil
}
