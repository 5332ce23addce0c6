package manifests

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// imageBinaries is what the image must hold: the binaries users run, never
// the test-fixture relay.
var imageBinaries = []string{
	"./extauthz/cmd/wirekube-extauthz",
	"./bridge/cmd/wirekube-bridge",
	"./tools/cmd/wirekube-relay-probe",
	"./tools/cmd/wirekube-relay-token",
}

func TestDockerfile(t *testing.T) {
	src, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(src)
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(df, -1)
	if len(froms) != 2 {
		t.Fatalf("want two stages (build, runtime), got %d", len(froms))
	}
	goVersion := goModVersion(t)
	mustf(t, strings.HasPrefix(froms[0][1], "golang:"+goVersion+"-"), "build stage %s, want golang:%s-<variant> (go.mod's version)", froms[0][1], goVersion)
	final := froms[1][1]
	mustf(t, final == "gcr.io/distroless/static-debian12:nonroot" || strings.HasPrefix(final, "gcr.io/distroless/static-debian12:nonroot@sha256:"),
		"runtime stage %s, want distroless static nonroot", final)
	mustf(t, regexp.MustCompile(`(?m)^USER\s+(65532|nonroot)`).MatchString(df), "no non-root USER")
	mustf(t, strings.Contains(df, "CGO_ENABLED=0"), "binaries must be static (CGO_ENABLED=0)")
	built := regexp.MustCompile(`\./\S+/cmd/[\w-]+`).FindAllString(df, -1)
	mustf(t, slices.Equal(built, imageBinaries), "Dockerfile builds %v, want exactly %v", built, imageBinaries)
	for _, line := range strings.Split(df, "\n") {
		code := strings.TrimSpace(line)
		mustf(t, strings.HasPrefix(code, "#") || !strings.Contains(code, "refrelay"), "the reference relay must not be built into the image: %s", code)
	}

	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	mustf(t, slices.Contains(strings.Fields(string(ignore)), "internal/test"), ".dockerignore must exclude internal/test")
}

// TestImageBuildGraph: the binaries in the image depend on nothing the
// .dockerignore leaves out (internal/test, testdata), so `make image`
// builds from the filtered context.
func TestImageBuildGraph(t *testing.T) {
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{join .EmbedFiles \" \"}}"}, imageBinaries...)
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list the image's binaries: %v\n%s", err, stderr.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		mustf(t, !strings.Contains(line, "internal/test/"), "an image binary depends on test-only code (internal/test): %s", line)
		mustf(t, !strings.Contains(line, "testdata/"), "an image binary embeds testdata, which .dockerignore drops: %s", line)
	}
}

func goModVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go\s+(\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}
