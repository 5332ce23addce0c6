package stack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// KubeVersion is the Kubernetes release the suite runs against; e2e/kubebin
// pins the same version.
const KubeVersion = "v1.37.2"

// Environment variables that point the harness at binaries the user has.
const (
	EnvKubebuilderAssets = "KUBEBUILDER_ASSETS" // envtest convention: a dir with kube-apiserver and etcd
	EnvAPIServer         = "WIREKUBE_E2E_KUBE_APISERVER"
	EnvEtcd              = "WIREKUBE_E2E_ETCD"
)

// kubeVersionLDFlags stamps the version as the Kubernetes build does
// (hack/lib/version.sh), so /version reports KubeVersion.
const kubeVersionLDFlags = "-X k8s.io/component-base/version.gitVersion=" + KubeVersion +
	" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37" +
	" -X k8s.io/component-base/version.gitTreeState=clean"

// KubeBinaries are the paths of the control-plane binaries.
type KubeBinaries struct {
	APIServer string
	Etcd      string
}

// RepoRoot walks up from the working directory to the main module's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("repo root: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(firstModuleLine(b), "module github.com/wirekube/relay-ws") &&
			!strings.Contains(firstModuleLine(b), "/e2e/") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repo root: no go.mod of github.com/wirekube/relay-ws above the working directory")
		}
		dir = parent
	}
}

func firstModuleLine(gomod []byte) string {
	sc := bufio.NewScanner(strings.NewReader(string(gomod)))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "module ") {
			return l
		}
	}
	return ""
}

// FindKubeBinaries returns kube-apiserver and etcd, in this order of
// preference: the explicit env paths, KUBEBUILDER_ASSETS, the build cache
// e2e/.cache/kube/<version>/, and finally a build from the Go module proxy
// into that cache (minutes when cold; progress goes to out).
func FindKubeBinaries(ctx context.Context, repoRoot string, out io.Writer) (KubeBinaries, error) {
	if a, e := os.Getenv(EnvAPIServer), os.Getenv(EnvEtcd); a != "" || e != "" {
		if a == "" || e == "" {
			return KubeBinaries{}, fmt.Errorf("kube binaries: set both %s and %s", EnvAPIServer, EnvEtcd)
		}
		return checkBinaries(KubeBinaries{APIServer: a, Etcd: e})
	}
	if dir := os.Getenv(EnvKubebuilderAssets); dir != "" {
		return checkBinaries(KubeBinaries{APIServer: filepath.Join(dir, "kube-apiserver"), Etcd: filepath.Join(dir, "etcd")})
	}
	unlock, err := lockBuildCache(repoRoot, "kube")
	if err != nil {
		return KubeBinaries{}, fmt.Errorf("kube binaries: %w", err)
	}
	defer unlock()
	cache := filepath.Join(repoRoot, "e2e", ".cache", "kube", KubeVersion)
	bins := KubeBinaries{APIServer: filepath.Join(cache, "kube-apiserver"), Etcd: filepath.Join(cache, "etcd")}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return KubeBinaries{}, fmt.Errorf("kube binaries: %w", err)
	}
	modDir := filepath.Join(repoRoot, "e2e", "kubebin")
	for _, b := range []struct{ path, pkg, ldflags string }{
		{bins.Etcd, "go.etcd.io/etcd/server/v3", ""},
		{bins.APIServer, "k8s.io/kubernetes/cmd/kube-apiserver", kubeVersionLDFlags},
	} {
		if _, err := os.Stat(b.path); err == nil {
			continue
		}
		if err := goBuild(ctx, modDir, b.path, b.pkg, b.ldflags, out); err != nil {
			return KubeBinaries{}, err
		}
	}
	return checkBinaries(bins)
}

func checkBinaries(b KubeBinaries) (KubeBinaries, error) {
	for _, p := range []string{b.APIServer, b.Etcd} {
		st, err := os.Stat(p)
		if err != nil {
			return KubeBinaries{}, fmt.Errorf("kube binaries: %w", err)
		}
		if st.Mode()&0o111 == 0 {
			return KubeBinaries{}, fmt.Errorf("kube binaries: %s is not executable", p)
		}
	}
	return b, nil
}

// goBuild builds pkg inside the module at modDir into dst, through a temporary
// name so that an interrupted build never leaves a broken cached binary.
func goBuild(ctx context.Context, modDir, dst, pkg, ldflags string, out io.Writer) error {
	start := time.Now()
	fmt.Fprintf(out, "harness: building %s (%s) into %s (a cold build takes minutes)\n", filepath.Base(dst), pkg, dst)
	tmp := dst + ".building"
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags="+ldflags, "-o", tmp, pkg)
	cmd.Dir = modDir
	// GOWORK=off: a go.work above the repo must not pull this module in.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-buildvcs=false")
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("build %s: %w", pkg, err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }() // owned here: we always receive below
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-waitErr:
			if err != nil {
				os.Remove(tmp)
				return fmt.Errorf("build %s: %w\n%s", pkg, err, stderr.String())
			}
			fmt.Fprintf(out, "harness: built %s in %s\n", filepath.Base(dst), time.Since(start).Round(time.Second))
			return os.Rename(tmp, dst)
		case <-tick.C:
			fmt.Fprintf(out, "harness: still building %s (%s)\n", filepath.Base(dst), time.Since(start).Round(time.Second))
		}
	}
}
