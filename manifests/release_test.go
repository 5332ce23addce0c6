package manifests

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/wirekube/relay-ws/internal/test/render"
	"github.com/wirekube/relay-ws/internal/version"
)

type workflow struct {
	Env  map[string]string
	Jobs map[string]struct {
		Permissions map[string]string
		Steps       []struct {
			Name string
			Uses string
			With map[string]string
			Run  string
		}
	}
}

func loadRelease(t *testing.T) (workflow, string) {
	t.Helper()
	data, err := os.ReadFile("../.github/workflows/release.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	if err := yaml.Unmarshal(data, &w); err != nil {
		t.Fatal(err)
	}
	return w, string(data)
}

// TestReleaseWorkflowSignsWithPinnedHelm: the tag-triggered workflow
// packages the chart with the helm every test renders it with, and signs
// the image and the chart by digest and SHA256SUMS with keyless cosign,
// each from a job allowed to request the OIDC token.
func TestReleaseWorkflowSignsWithPinnedHelm(t *testing.T) {
	w, _ := loadRelease(t)
	mustf(t, w.Env["HELM_VERSION"] == render.HelmVersion, "release helm %q, tests use %q", w.Env["HELM_VERSION"], render.HelmVersion)
	helmSetup := false
	for _, s := range w.Jobs["chart"].Steps {
		helmSetup = helmSetup || strings.Contains(s.Run, `go install "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"`)
	}
	mustf(t, helmSetup, "the chart job does not install helm $HELM_VERSION")
	for job, sign := range map[string]*regexp.Regexp{
		"image":   regexp.MustCompile(`cosign sign --yes "\$\{IMAGE\}@\$\{DIGEST\}"`),
		"chart":   regexp.MustCompile(`cosign sign --yes "\$\{CHART_REPO#oci://\}/[^"]*@\$\{digest\}"`),
		"release": regexp.MustCompile(`cosign sign-blob --yes --bundle \S+ SHA256SUMS`),
	} {
		j := w.Jobs[job]
		mustf(t, j.Permissions["id-token"] == "write", "job %s cannot request the OIDC token keyless signing needs", job)
		installed, signed := false, false
		for _, s := range j.Steps {
			installed = installed || strings.HasPrefix(s.Uses, "sigstore/cosign-installer@")
			signed = signed || sign.MatchString(s.Run)
		}
		mustf(t, installed && signed, "job %s: cosign installed %v, signs %v (want %s)", job, installed, signed, sign)
	}
}

// TestReleaseNotesOfPinnedVersion: CHANGELOG.md has a dated section for the
// version every artifact pins, and the release job's own awk program
// (run here as the workflow runs it) extracts non-empty notes from it.
func TestReleaseNotesOfPinnedVersion(t *testing.T) {
	changelog, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	head := regexp.MustCompile(`(?m)^## \[` + regexp.QuoteMeta(version.Release) + `\] - \d{4}-\d{2}-\d{2}$`)
	mustf(t, head.Match(changelog), "CHANGELOG.md has no dated section ## [%s] - YYYY-MM-DD", version.Release)
	_, raw := loadRelease(t)
	m := regexp.MustCompile(`(?s)notes="\$\(awk -v tag="\$\{TAG#v\}" '(.*?)' CHANGELOG\.md\)"`).FindStringSubmatch(raw)
	if m == nil {
		t.Fatal("release.yaml: no awk program extracting the notes")
	}
	cmd := exec.Command("awk", "-v", "tag="+strings.TrimPrefix(version.Release, "v"), m[1], "CHANGELOG.md")
	cmd.Dir = ".."
	out, err := cmd.Output()
	mustf(t, err == nil && strings.Contains(string(out), "### Added") && !strings.Contains(string(out), "## [v0.1.0]"),
		"the workflow's awk gives %d bytes (%v), want the %s section only", len(out), err, version.Release)
}

// artifactHub is Chart.yaml's Artifact Hub annotations, decoded.
type artifactHub struct {
	images  []struct{ Name, Image string }
	changes []struct{ Kind, Description string }
	links   []struct{ Name, URL string }
	license string
}

func loadArtifactHub(t *testing.T) artifactHub {
	t.Helper()
	var chart struct{ Annotations map[string]string }
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err == nil {
		err = yaml.Unmarshal(data, &chart)
	}
	if err != nil {
		t.Fatal(err)
	}
	var a artifactHub
	for key, into := range map[string]any{"artifacthub.io/images": &a.images, "artifacthub.io/changes": &a.changes, "artifacthub.io/links": &a.links} {
		if err := yaml.Unmarshal([]byte(chart.Annotations[key]), into); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	a.license = chart.Annotations["artifacthub.io/license"]
	return a
}

var updateArtifactHubChanges = flag.Bool("update-artifacthub-changes", false,
	"rewrite Chart.yaml's artifacthub.io/changes from the CHANGELOG section of the pinned version (make chart-readme)")

// writeArtifactHubChanges replaces the artifacthub.io/changes block of
// Chart.yaml with entries ("kind: title").
func writeArtifactHubChanges(t *testing.T, entries []string) {
	t.Helper()
	path := filepath.Join(chartDir, "Chart.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const head = "  artifacthub.io/changes: |\n"
	lines := strings.SplitAfter(string(data), "\n")
	var out strings.Builder
	for i := 0; i < len(lines); i++ {
		out.WriteString(lines[i])
		if lines[i] != head {
			continue
		}
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    ") {
			i++
		}
		for _, e := range entries {
			kind, title, _ := strings.Cut(e, ": ")
			fmt.Fprintf(&out, "    - kind: %s\n      description: %q\n", kind, title)
		}
	}
	if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestChartArtifactHub: the images Artifact Hub lists are those a default
// install runs, the changes are the CHANGELOG section's entries of the
// pinned version (kind from its heading, description its bold title), the
// links are pinned to the version, and the license is LICENSE's.
func TestChartArtifactHub(t *testing.T) {
	a := loadArtifactHub(t)
	var listed, running []string
	for _, i := range a.images {
		listed = append(listed, i.Image)
	}
	for _, c := range renderChart(t).deployment(t).Spec.Template.Spec.Containers {
		if !slices.Contains(running, c.Image) {
			running = append(running, c.Image)
		}
	}
	slices.Sort(listed)
	slices.Sort(running)
	mustf(t, slices.Equal(listed, running), "artifacthub.io/images %v, a default install runs %v", listed, running)
	want := changelogEntries(t, version.Release)
	if *updateArtifactHubChanges {
		writeArtifactHubChanges(t, want)
		a = loadArtifactHub(t)
	}
	mustf(t, len(a.changes) == len(want), "artifacthub.io/changes has %d entries, CHANGELOG %s has %d", len(a.changes), version.Release, len(want))
	for i := range min(len(a.changes), len(want)) {
		got := a.changes[i].Kind + ": " + a.changes[i].Description
		mustf(t, got == want[i], "change %d: %q, CHANGELOG says %q", i, got, want[i])
	}
	for _, l := range a.links {
		mustf(t, !strings.Contains(l.URL, "/blob/main/") && !strings.Contains(l.URL, "/tree/main/"), "link %s points at main: %s", l.Name, l.URL)
	}
	lic, err := os.ReadFile("../LICENSE")
	mustf(t, err == nil && strings.Contains(string(lic), "Apache License") && strings.Contains(string(lic), "Version 2.0") && a.license == "Apache-2.0",
		"artifacthub.io/license %q, LICENSE is Apache 2.0 (%v)", a.license, err)
}

// changelogEntries returns "kind: title" for each bold-titled entry of the
// CHANGELOG section of release under Added, Changed, Deprecated, Removed,
// Fixed or Security (Artifact Hub's kinds).
func changelogEntries(t *testing.T, release string) []string {
	t.Helper()
	data, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	section := false
	kind := ""
	var out []string
	title := regexp.MustCompile(`^- \*\*(.+?)\*\*`)
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			section = strings.HasPrefix(line, "## ["+release+"]")
		case section && strings.HasPrefix(line, "### "):
			kind = strings.ToLower(strings.TrimPrefix(line, "### "))
			if !slices.Contains([]string{"added", "changed", "deprecated", "removed", "fixed", "security"}, kind) {
				kind = ""
			}
		case section && kind != "":
			if m := title.FindStringSubmatch(line); m != nil {
				out = append(out, kind+": "+strings.TrimRight(m[1], ".:"))
			}
		}
	}
	return out
}
