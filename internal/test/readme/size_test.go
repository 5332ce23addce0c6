package readme

import (
	"os"
	"path/filepath"
	"testing"
)

// readmeMaxBytes bounds README.md: the entrance says what the gateway is,
// how to install it and where to read on; figures, history and reference
// belong to docs/, where the README links.
const readmeMaxBytes = 12_000

// TestReadmeIsAtMost12KB: README.md (12,000 bytes at most) stays an entrance a reader finishes.
func TestReadmeIsAtMost12KB(t *testing.T) {
	fi, err := os.Stat(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > readmeMaxBytes {
		t.Errorf("README.md is %d bytes, over %d: move detail into docs/ and link it", fi.Size(), readmeMaxBytes)
	}
}
