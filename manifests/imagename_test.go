package manifests

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/version"
)

// TestOneImageName: every place that names this project's image uses
// version.Image (ghcr.io/wirekube/relay-ws), and no old name is left.
func TestOneImageName(t *testing.T) {
	files := map[string]string{
		"../Makefile":                             "IMAGE ?= " + version.Image + ":$(VERSION)",
		"../docker-compose.yaml":                  "image: " + version.Image + ":${VERSION:-dev}",
		"../Dockerfile":                           `org.opencontainers.image.ref.name="` + version.Image + `"`,
		"base/kustomization.yaml":                 "newName: " + version.Image,
		"../charts/wirekube-relay-ws/values.yaml": "repository: " + version.Image,
		"../.github/workflows/release.yaml":       "IMAGE: " + version.Image,
	}
	old := regexp.MustCompile(`(^|[\s:"=])wirekube/relay-ws:`)
	for path, want := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s does not contain %q", path, want)
		}
		if m := old.FindString(string(b)); m != "" {
			t.Errorf("%s still names the image without its registry: %q", path, m)
		}
	}
}
