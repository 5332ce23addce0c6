package manifests

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/wirekube/relay-ws/internal/test/render"
	"github.com/wirekube/relay-ws/internal/version"
)

// workflow is the part of a GitHub Actions workflow these tests read.
type workflow struct {
	Jobs map[string]struct {
		Permissions map[string]string `json:"permissions"`
		Steps       []struct {
			Uses string            `json:"uses"`
			With map[string]string `json:"with"`
			Run  string            `json:"run"`
		} `json:"steps"`
	} `json:"jobs"`
}

func readWorkflow(t *testing.T, path string) workflow {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	if err := yaml.Unmarshal(b, &w); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return w
}

// TestReleasePackagesTheChartWithThePinnedHelm: the release workflow
// installs the helm release the tests render and lint the chart with.
func TestReleasePackagesTheChartWithThePinnedHelm(t *testing.T) {
	w := readWorkflow(t, "../.github/workflows/release.yaml")
	found := 0
	for name, j := range w.Jobs {
		for _, s := range j.Steps {
			if strings.HasPrefix(s.Uses, "azure/setup-helm@") {
				found++
				if got := s.With["version"]; got != render.HelmVersion {
					t.Errorf("job %s installs helm %q; the tree renders the chart with %s", name, got, render.HelmVersion)
				}
			}
		}
	}
	if found == 0 {
		t.Error("no job installs helm")
	}
}

// TestReleaseSignsEveryArtifactKeyless: the image and the chart are signed
// by digest, SHA256SUMS (which covers the archives and SBOMs) as a bundle,
// each by a job allowed to request an OIDC token (keyless cosign) and with
// cosign installed.
func TestReleaseSignsEveryArtifactKeyless(t *testing.T) {
	w := readWorkflow(t, "../.github/workflows/release.yaml")
	want := map[string]*regexp.Regexp{
		"image":   regexp.MustCompile(`cosign sign --yes "\$\{IMAGE\}@\$\{DIGEST\}"`),
		"chart":   regexp.MustCompile(`cosign sign --yes "\$\{CHART_REPO#oci://\}/\$\{chart\}@\$\{digest\}"`),
		"release": regexp.MustCompile(`cosign sign-blob --yes --bundle SHA256SUMS\.sigstore\.json SHA256SUMS`),
	}
	for name, re := range want {
		j, ok := w.Jobs[name]
		if !ok {
			t.Errorf("no job %s", name)
			continue
		}
		if j.Permissions["id-token"] != "write" {
			t.Errorf("job %s: permissions id-token = %q, want write (keyless signing)", name, j.Permissions["id-token"])
		}
		installed, signed := false, false
		for _, s := range j.Steps {
			if strings.HasPrefix(s.Uses, "sigstore/cosign-installer@") {
				installed = true
			}
			if re.MatchString(s.Run) {
				if !installed {
					t.Errorf("job %s signs before installing cosign", name)
				}
				signed = true
			}
		}
		if !signed {
			t.Errorf("job %s has no step matching %s", name, re)
		}
	}
}

// TestChangelogHasTheReleasedVersion: the version every artifact pins
// (version.Release, held equal to the chart's appVersion and the base's
// image tag by TestVersionPinned) has its own dated CHANGELOG
// section, which the release workflow publishes as the release notes.
func TestChangelogHasTheReleasedVersion(t *testing.T) {
	b, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^## \[` + regexp.QuoteMeta(version.Release) + `\] - \d{4}-\d{2}-\d{2}$`)
	if !re.Match(b) {
		t.Errorf("CHANGELOG.md has no section %q with a date", "## ["+version.Release+"] - YYYY-MM-DD")
	}
}
