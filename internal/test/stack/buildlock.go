package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockBuildCache takes an exclusive lock on one artifact of e2e/.cache (name:
// "kube", "traefik") so that two processes that find that cached binary
// missing (the background wirekube-e2e-deps started by .ci/run and the suite
// itself, or two test binaries) build it once: the second waits and then
// finds it. Each artifact has its own lock, so a suite that needs only
// kube-apiserver never waits for a Traefik build. The lock is released by the
// returned func or when the process ends.
func lockBuildCache(repoRoot, name string) (unlock func(), err error) {
	dir := filepath.Join(repoRoot, "e2e", ".cache")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("build lock: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".build-"+name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("build lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("build lock: %w", err)
	}
	return func() { f.Close() }, nil // closing the descriptor releases the flock
}
