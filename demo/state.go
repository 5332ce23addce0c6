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

// policyRCD makes Debian's maintainer scripts not start the nginx service
// they install: the demo runs its own nginx and must leave nothing running.
const policyRCD = "/usr/sbin/policy-rc.d"

// nginxInstaller installs nginx with apt-get when it is missing.
type nginxInstaller struct {
	allowed bool
	isRoot  bool
	have    func() bool
	run     runner
	out     io.Writer
	// policyPath is policyRCD; tests point it into a temp dir.
	policyPath string
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
	fmt.Fprintln(n.out, "demo: nginx not found: installing it with apt-get (the service is not started)")
	restore, err := n.blockServiceStart()
	if err != nil {
		return err
	}
	defer restore()
	env := []string{"DEBIAN_FRONTEND=noninteractive"}
	install := []string{"install", "-y", "--no-install-recommends", "nginx"}
	if err := n.run(ctx, env, "apt-get", install...); err != nil {
		// A fresh machine may have no package lists yet.
		if uerr := n.run(ctx, env, "apt-get", "update"); uerr != nil {
			return fmt.Errorf("install nginx: %w", errors.Join(err, uerr))
		}
		if err := n.run(ctx, env, "apt-get", install...); err != nil {
			return fmt.Errorf("install nginx: %w", err)
		}
	}
	if !n.have() {
		return errors.New("install nginx: apt-get succeeded but no nginx binary was found")
	}
	return nil
}

// blockServiceStart writes a policy-rc.d that denies service starts, unless
// the machine already has one (container images usually do); restore
// removes only a file it wrote.
func (n nginxInstaller) blockServiceStart() (restore func(), err error) {
	if _, err := os.Stat(n.policyPath); err == nil {
		return func() {}, nil
	}
	if err := os.WriteFile(n.policyPath, []byte("#!/bin/sh\n# written by wirekube-demo while it installs nginx\nexit 101\n"), 0o755); err != nil {
		return nil, fmt.Errorf("install nginx: %s: %w", n.policyPath, err)
	}
	return func() { os.Remove(n.policyPath) }, nil
}
