package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/test/contractdoc"
)

// readmeVersionRow returns the README's "## Supported versions" table row
// whose first cell is name.
func readmeVersionRow(t *testing.T, readme, name string) string {
	t.Helper()
	_, sec, ok := strings.Cut(readme, "\n## Supported versions\n")
	if !ok {
		t.Fatal("README.md has no ## Supported versions section")
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	for _, line := range strings.Split(sec, "\n") {
		if cells := contractdoc.SplitRow(line); strings.HasPrefix(line, "|") && cells[0] == name {
			return line
		}
	}
	t.Fatalf("README.md's supported versions have no row %q", name)
	return ""
}

// repoValue returns the first submatch of re in the repository file rel.
func repoValue(t *testing.T, root, rel, re string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(re).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no match for %s", rel, re)
	}
	return string(m[1])
}

// TestReadmeSupportedVersionsMatchTheRepo: each version the README's
// supported-versions table states is the one the repository pins: the
// go.mod go line, the chart's kubeVersion floor, the kube-apiserver the
// e2e suite builds, the helm that renders the chart, the Envoy image of the
// manifests and the Traefik of the front matrix.
func TestReadmeSupportedVersionsMatchTheRepo(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, c := range []struct{ row, file, re string }{
		{"Go", "go.mod", `(?m)^go (\d+\.\d+\.\d+)$`},
		{"Kubernetes", "charts/wirekube-relay-ws/Chart.yaml", `kubeVersion: ">=(\d+\.\d+)\.`},
		{"Kubernetes", "internal/test/stack/kubebin.go", `KubeVersion = "(v[\d.]+)"`},
		{"Kubernetes", "internal/test/render/helm.go", `HelmVersion = "(v[\d.]+)"`},
		{"Envoy", "manifests/base/deployment.yaml", `image: envoyproxy/envoy:(v[\d.]+)`},
		{"Traefik", "internal/test/stack/traefik.go", `TraefikVersion = "(v[\d.]+)"`},
	} {
		want := repoValue(t, root, c.file, c.re)
		if row := readmeVersionRow(t, readme, c.row); !strings.Contains(row, want) {
			t.Errorf("README.md's %s row does not say %s (%s pins it): %s", c.row, want, c.file, row)
		}
	}
}
