//go:build e2e

package e2e

import (
	"bytes"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var metaGet = metav1.GetOptions{}

// tokenReviews counts the TokenReviews kube-apiserver has completed, from
// its audit log (metadata level: never a token). It waits a moment first so
// that a review caused by the previous request has been written.
func (e *env) tokenReviews(t *testing.T) int {
	t.Helper()
	time.Sleep(300 * time.Millisecond)
	b, err := os.ReadFile(e.cluster.AuditLog)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for line := range bytes.Lines(b) {
		if bytes.Contains(line, []byte(`"resource":"tokenreviews"`)) &&
			bytes.Contains(line, []byte(`"stage":"ResponseComplete"`)) {
			n++
		}
	}
	return n
}
