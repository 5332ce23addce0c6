package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/wirekube/relay-ws/internal/test/stack"
)

// lockName is the one file of the state dir that survives a reset: it is
// flock'ed for the whole run so a second demo cannot wipe a live stack.
const lockName = ".lock"

// stateDir is the locked, emptied state directory of one run.
type stateDir struct {
	path string
	lock *os.File
}

// openStateDir creates path, takes its lock (failing at once when another
// run holds it) and removes everything a previous run left there.
func openStateDir(path string) (*stateDir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(path, lockName), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("state dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("state dir %s is in use by another demo (stop it first): %w", path, err)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("state dir: %w", err)
	}
	for _, e := range entries {
		if e.Name() == lockName {
			continue
		}
		if err := os.RemoveAll(filepath.Join(path, e.Name())); err != nil {
			f.Close()
			return nil, fmt.Errorf("state dir reset: %w", err)
		}
	}
	return &stateDir{path: path, lock: f}, nil
}

// join is a path inside the state dir.
func (s *stateDir) join(elem ...string) string {
	return filepath.Join(append([]string{s.path}, elem...)...)
}

// writeFile writes a file inside the state dir, creating its directory.
func (s *stateDir) writeFile(name string, data []byte, perm os.FileMode) (string, error) {
	p := s.join(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.WriteFile(p, data, perm); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	return p, nil
}

// close releases the lock; the files stay for the user to read.
func (s *stateDir) close() error { return s.lock.Close() }

// runner runs a command; tests replace it.
type runner func(ctx context.Context, env []string, name string, args ...string) error

func execRunner(out io.Writer) runner {
	return func(ctx context.Context, env []string, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
}

func haveNginx() bool {
	_, err := stack.NginxBinary()
	return err == nil
}

// aptInstall is the repository's one package installer (relative to the
// repository root): apt-get for the missing programs, with a policy-rc.d in
// place so that the services the packages ship are not started (the demo
// runs its own nginx and must leave nothing running).
const aptInstall = ".ci/apt-install"

// nginxInstaller installs nginx with aptInstall when it is missing.
type nginxInstaller struct {
	allowed bool
	isRoot  bool
	have    func() bool
	run     runner
	out     io.Writer
	script  string // the path of aptInstall
}

// ensure makes nginx available or explains what the user must do.
func (n nginxInstaller) ensure(ctx context.Context) error {
	if n.have() {
		return nil
	}
	if !n.allowed {
		return errors.New("nginx not found: install it (sudo apt-get install -y nginx) or drop --install-nginx=false")
	}
	if !n.isRoot {
		return errors.New("nginx not found and not running as root: run `sudo apt-get install -y nginx` once, then again")
	}
	fmt.Fprintln(n.out, "demo: nginx not found: installing it with "+aptInstall+" (the service is not started)")
	if err := n.run(ctx, nil, n.script, "nginx"); err != nil {
		return fmt.Errorf("install nginx: %w", err)
	}
	if !n.have() {
		return errors.New("install nginx: " + aptInstall + " succeeded but no nginx binary was found")
	}
	return nil
}
