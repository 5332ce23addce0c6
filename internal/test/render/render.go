// Package render renders this repository's deployables for the tests, the
// e2e suite and the demo: Kustomize directories under manifests/ (with a
// pinned kustomize or kubectl), the Helm chart under charts/ (with a pinned
// helm), and the CRD fixtures under manifests/testdata/crds that a test
// cluster needs before the rendered objects apply. manifests/ and charts/
// hold only data; nothing here is linked into a shipped binary.
package render

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// ManifestsDir is the Kustomize tree, relative to the repository root.
const ManifestsDir = "manifests"

// PeerCRDPath is the WireKubePeer CRD fixture, relative to the repository
// root.
const PeerCRDPath = "manifests/testdata/crds/wirekubepeers.yaml"

// CRDs returns every CRD fixture the rendered manifests need, read from the
// repository, in install order: the WireKube kinds first, then the
// shape-only stand-ins for third-party kinds the examples use (Gateway API,
// Istio, Envoy Gateway, Prometheus Operator).
func CRDs() ([]NamedFile, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	var out []NamedFile
	for _, dir := range []string{"manifests/testdata/crds", "manifests/testdata/crds/third-party"} {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			return nil, fmt.Errorf("render: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			data, err := os.ReadFile(filepath.Join(root, dir, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("render: %w", err)
			}
			out = append(out, NamedFile{Name: e.Name(), Data: data})
		}
	}
	return out, nil
}

// NamedFile is one file read from the repository.
type NamedFile struct {
	Name string
	Data []byte
}

// Dirs lists every directory Kustomize renders (relative to
// ManifestsDir): the base and each example. The e2e suite dry-runs each one.
func Dirs() []string {
	dirs := []string{
		"base",
		"examples/agent-token",
		"examples/alb-ingress",
		"examples/envoy-gateway",
		"examples/gateway-api",
		"examples/ingress-nginx",
		"examples/istio",
		"examples/mesh-external",
		"examples/mesh-managed",
		"examples/peer-admission",
		"examples/peer-serviceaccount",
		"examples/prometheus",
		"examples/relay-lockdown",
	}
	sort.Strings(dirs)
	return dirs
}
