// Package manifests holds the Kubernetes manifests of the gateway (kustomize
// base under base/, examples under examples/, components under components/)
// and the CRD fixtures the tests and the e2e suite install. The Go code here
// names those paths, embeds the fixtures and renders a directory (Kustomize,
// with a pinned kustomize or kubectl); the tests render every directory and
// check what a reviewer would check.
package manifests

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
)

// PeerCRDPath is the WireKubePeer CRD fixture, relative to this directory.
const PeerCRDPath = "testdata/crds/wirekubepeers.yaml"

//go:embed testdata/crds
var crds embed.FS

// CRDs returns every CRD fixture the rendered manifests need, keyed by file
// name, in install order: the WireKube kinds first, then the shape-only
// stand-ins for third-party kinds the examples use (Gateway API, Istio, Envoy
// Gateway, Prometheus Operator).
func CRDs() ([]NamedFile, error) {
	var out []NamedFile
	for _, dir := range []string{"testdata/crds", "testdata/crds/third-party"} {
		entries, err := fs.ReadDir(crds, dir)
		if err != nil {
			return nil, fmt.Errorf("manifests: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			data, err := fs.ReadFile(crds, path.Join(dir, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("manifests: %w", err)
			}
			out = append(out, NamedFile{Name: e.Name(), Data: data})
		}
	}
	return out, nil
}

// NamedFile is one embedded file.
type NamedFile struct {
	Name string
	Data []byte
}

// Dirs lists every directory Kustomize renders (relative to this
// directory): the base and each example. The e2e suite dry-runs each one.
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
		"examples/peer-serviceaccount",
		"examples/prometheus",
		"examples/tcp-migration",
	}
	sort.Strings(dirs)
	return dirs
}
