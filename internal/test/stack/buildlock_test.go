package stack

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestBuildLockIsPerArtifact: while the Traefik build holds its lock, the
// kube lock is free and a second Traefik lock is not. Fails when every
// artifact shares one lock file (a suite that needs only kube-apiserver then
// waits out a whole Traefik build).
func TestBuildLockIsPerArtifact(t *testing.T) {
	root := t.TempDir()
	unlock, err := lockBuildCache(root, "traefik")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if err := tryLock(t, filepath.Join(root, "e2e", ".cache", ".build-kube.lock")); err != nil {
		t.Fatalf("kube lock while traefik is building: %v, want free", err)
	}
	if err := tryLock(t, filepath.Join(root, "e2e", ".cache", ".build-traefik.lock")); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("second traefik lock: %v, want EWOULDBLOCK", err)
	}
}

// tryLock takes and releases an exclusive flock on path without waiting.
func tryLock(t *testing.T, path string) error {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
