//go:build e2e

package e2e

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// testLogs: scenario 8. No log of any process of the run (kube-apiserver and
// its audit log, etcd, relay, extauthz, bridge, nginx, the gRPC front)
// contains a token the suite used, nor a whole public key.
func (e *env) testLogs(t *testing.T) {
	// Every file below the log directory: the front matrix keeps each
	// front's own logs in fronts/<name>/.
	var files []string
	fatalIf(t, filepath.WalkDir(e.procs.LogDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	}))
	e.mu.Lock()
	tokens, keys := append([]string(nil), e.tokens...), e.keys
	e.mu.Unlock()
	if len(files) < 7 || len(tokens) < 20 {
		t.Fatalf("only %d log files and %d tokens: the scan would prove little", len(files), len(tokens))
	}
	var total int64
	for _, name := range files {
		b, err := os.ReadFile(name)
		fatalIf(t, err)
		total += int64(len(b))
		for i, tok := range tokens {
			if bytes.Contains(b, []byte(tok)) {
				t.Errorf("%s contains token #%d", filepath.Base(name), i)
			}
		}
		for _, k := range keys {
			if bytes.Contains(b, []byte(k.Base64())) {
				t.Errorf("%s contains the whole public key %s", filepath.Base(name), k)
			}
		}
	}
	t.Logf("scanned %d log files (%d bytes) for %d tokens and %d keys", len(files), total, len(tokens), len(keys))
}
