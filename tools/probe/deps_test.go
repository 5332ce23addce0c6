package probe

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoTestCode: the probe and its command link nothing under
// internal/test (docs/spec.md: the probe has its own client, testagent is
// for the tests, the benchmarks and the demo), so the shipped binary
// carries no test harness.
func TestLinksNoTestCode(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", ".", "../cmd/wirekube-relay-probe")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderr.String())
	}
	for _, pkg := range strings.Fields(out.String()) {
		if strings.HasPrefix(pkg, "github.com/wirekube/relay-ws/internal/test/") {
			t.Errorf("the probe links %s", pkg)
		}
	}
}
