package manifests

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

// TestReleaseNotesOfPinnedVersion: the release job's own awk program (run
// here as the workflow runs it) extracts the notes of the newest dated
// CHANGELOG section (the pinned version's at a release commit,
// TestVersionSaysWhatTheTreeIs) and nothing of the sections around it.
func TestReleaseNotesOfPinnedVersion(t *testing.T) {
	var newest string
	for _, h := range changelogHeads(t) {
		if m := datedHead.FindStringSubmatch(h); m != nil && newest == "" {
			newest = m[1]
		}
	}
	mustf(t, newest != "", "CHANGELOG.md has no dated section")
	_, raw := loadRelease(t)
	m := regexp.MustCompile(`(?s)notes="\$\(awk -v tag="\$\{TAG#v\}" '(.*?)' CHANGELOG\.md\)"`).FindStringSubmatch(raw)
	if m == nil {
		t.Fatal("release.yaml: no awk program extracting the notes")
	}
	cmd := exec.Command("awk", "-v", "tag="+strings.TrimPrefix(newest, "v"), m[1], "CHANGELOG.md")
	cmd.Dir = ".."
	out, err := cmd.Output()
	mustf(t, err == nil && strings.Contains(string(out), "### Added") && !strings.Contains(string(out), "\n## "),
		"the workflow's awk gives %d bytes (%v), want the %s section only", len(out), err, newest)
}

// artifactHub is Chart.yaml's Artifact Hub annotations, decoded.
type artifactHub struct {
	images     []struct{ Name, Image string }
	changes    []struct{ Kind, Description string }
	links      []struct{ Name, URL string }
	license    string
	prerelease string
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
	a.prerelease = chart.Annotations["artifacthub.io/prerelease"]
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
// pinned version (Unreleased for a -dev one; kind from its heading,
// description its bold title), the links name the ref of its docs (the tag,
// main for -dev), a -dev chart is a prerelease, and the license is
// LICENSE's.
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
	section := version.Release
	if strings.HasSuffix(section, devSuffix) {
		section = "Unreleased"
	}
	want := changelogEntries(t, section)
	if *updateArtifactHubChanges {
		writeArtifactHubChanges(t, want)
		a = loadArtifactHub(t)
	}
	mustf(t, len(a.changes) == len(want), "artifacthub.io/changes has %d entries, CHANGELOG %s has %d", len(a.changes), version.Release, len(want))
	for i := range min(len(a.changes), len(want)) {
		got := a.changes[i].Kind + ": " + a.changes[i].Description
		mustf(t, got == want[i], "change %d: %q, CHANGELOG says %q", i, got, want[i])
	}
	ref := regexp.MustCompile(`^https://github\.com/wirekube/relay-ws/(?:blob|tree)/([^/]+)/`)
	for _, l := range a.links {
		m := ref.FindStringSubmatch(l.URL)
		mustf(t, m != nil && m[1] == docsRef(version.Release), "link %s: %s, want it at %s", l.Name, l.URL, docsRef(version.Release))
	}
	mustf(t, a.prerelease == strconv.FormatBool(strings.Contains(version.Release, "-")),
		"artifacthub.io/prerelease %q for %s", a.prerelease, version.Release)
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

// versionStep returns the run script of the release workflow's version job.
func versionStep(t *testing.T) string {
	t.Helper()
	w, _ := loadRelease(t)
	for _, s := range w.Jobs["version"].Steps {
		if strings.Contains(s.Run, "GITHUB_OUTPUT") {
			return s.Run
		}
	}
	t.Fatal("release.yaml: the version job has no step writing its outputs")
	return ""
}

// TestReleaseFromMain: the release workflow runs on pushes to main (not on
// a tag, which never reached the repository) and its version job, run here
// in a scratch clone as the workflow runs it, publishes a release version
// once: not a -dev tree, not a version whose tag exists. The tag is made by
// the last step, on the commit built.
func TestReleaseFromMain(t *testing.T) {
	_, raw := loadRelease(t)
	mustf(t, regexp.MustCompile(`(?m)^on:\n  push:\n    branches: \[main\]\n`).MatchString(raw) && !strings.Contains(raw, "tags: ["),
		"release.yaml is not triggered by pushes to main alone")
	mustf(t, !strings.Contains(raw, "github.ref_name"), "release.yaml reads github.ref_name, which is main on a push to main")
	mustf(t, strings.Contains(raw, `gh release create "$TAG" dist/* --target "$GITHUB_SHA"`), "the release step does not tag the commit it built")
	script := versionStep(t)
	origin := t.TempDir()
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(origin, "init", "-q")
	git(origin, "commit", "-q", "--allow-empty", "-m", "x")
	git(origin, "tag", "v0.2.0")
	for release, want := range map[string]string{"v0.3.0-dev": "publish=false", "v0.2.0": "publish=false", "v0.3.0": "publish=true", "v0.3.0-rc.1": "publish=true"} {
		clone := t.TempDir()
		git(clone, "clone", "-q", origin, ".")
		err := os.MkdirAll(filepath.Join(clone, "internal", "version"), 0o755)
		if err == nil {
			err = os.WriteFile(filepath.Join(clone, "internal", "version", "version.go"), []byte("package version\n\nconst Release = \""+release+"\"\n"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "output")
		cmd := exec.Command("bash", "-e", "-c", script)
		cmd.Dir, cmd.Env = clone, append(os.Environ(), "GITHUB_OUTPUT="+out)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: the version step failed: %v\n%s", release, err, b)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		mustf(t, strings.Contains(string(got), "tag="+release+"\n") && strings.Contains(string(got), want+"\n"), "Release %s: outputs %q, want tag=%s and %s", release, got, release, want)
	}
}
