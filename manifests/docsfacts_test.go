package manifests

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsWireKubeFacts: what the documents and the chart's NOTES say
// about WireKube itself (docs/spec.md, the chart section): the agent's key
// is /var/lib/wirekube/privatekey (there is no /etc/wireguard key), and the
// allow answer carries five identity headers.
func TestDocsWireKubeFacts(t *testing.T) {
	var files []string
	for _, root := range []string{"../docs", "../charts/wirekube-relay-ws/templates", "examples"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".md") || strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".txt")) {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	files = append(files, "../README.md")
	keyPath := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(data)
		mustf(t, !strings.Contains(s, "/etc/wireguard"), "%s names /etc/wireguard: WireKube keeps the key at /var/lib/wirekube/privatekey", f)
		mustf(t, !strings.Contains(s, "four identity headers"), "%s counts four identity headers: there are five (X-WireKube-Binding)", f)
		keyPath[filepath.Base(f)] = strings.Contains(s, "/var/lib/wirekube/privatekey")
	}
	for _, f := range []string{"README.md", "tools.md", "alongside-chart.md", "NOTES.txt"} {
		mustf(t, keyPath[f], "%s gives no probe command with the agent's key /var/lib/wirekube/privatekey", f)
	}
}
