package bridge

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoKubernetesOrEnvoy: the bridge and its command link no k8s.io,
// sigs.k8s.io or Envoy package (the bridge knows Kubernetes only through
// the headers extauthz sets), so its image stays small and its attack
// surface free of client-go.
func TestLinksNoKubernetesOrEnvoy(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./...")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list -deps ./bridge/...: %v\n%s", err, stderr.String())
	}
	for _, pkg := range strings.Fields(out.String()) {
		if strings.HasPrefix(pkg, "k8s.io/") || strings.HasPrefix(pkg, "sigs.k8s.io/") ||
			strings.HasPrefix(pkg, "github.com/envoyproxy/") {
			t.Errorf("the bridge links %s", pkg)
		}
	}
}
