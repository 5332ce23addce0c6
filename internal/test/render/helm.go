package render

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/wirekube/relay-ws/internal/test/gotool"
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

func isPinnedHelm(path string) bool { return gotool.Pinned(path, HelmModule, HelmVersion) }

// installHelm builds the pinned helm into dir/helm.
func installHelm(ctx context.Context, dir string) error {
	_, err := gotool.Install(ctx, HelmModule, HelmVersion, dir)
	return err
}
