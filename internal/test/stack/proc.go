// Package stack starts and stops the processes of the end-to-end suite: a
// real etcd and kube-apiserver, the repository's binaries, nginx and the
// Envoy stand-in. It takes an io.Writer for progress instead of a
// *testing.T so that `make demo` can reuse it; the e2e tests wrap it.
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Proc is one child process. Its stdout and stderr go to LogPath.
type Proc struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has been reaped
	err     error         // set before done is closed
}

// PID is the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the exit error; valid after Done is closed.
func (p *Proc) Err() error { <-p.done; return p.err }

// Signal sends sig to the process by PID.
func (p *Proc) Signal(sig os.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	return p.cmd.Process.Signal(sig)
}

// Stop sends SIGTERM, waits up to grace, then SIGKILL. It is idempotent.
func (p *Proc) Stop(grace time.Duration) error {
	if err := p.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", p.Name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", p.Name, err)
	}
	<-p.done
	return nil
}

// Procs owns every process the harness starts, so that one Close stops them
// all by PID, also when a test fails half-way.
type Procs struct {
	LogDir string
	Out    io.Writer // progress lines; never nil after NewProcs

	mu   sync.Mutex
	list []*Proc
	seq  int
}

// NewProcs creates logDir and returns an empty process set.
func NewProcs(logDir string, out io.Writer) (*Procs, error) {
	if out == nil {
		out = io.Discard
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("log dir: %w", err)
	}
	return &Procs{LogDir: logDir, Out: out}, nil
}

// Start runs bin with args; the log file is LogDir/<name>.<n>.log so that a
// restarted process keeps the log of its previous run.
func (ps *Procs) Start(name, bin string, args ...string) (*Proc, error) {
	return ps.StartEnv(name, bin, nil, args...)
}

// StartEnv is Start with extra environment variables (KEY=value) added to
// the test process's own.
func (ps *Procs) StartEnv(name, bin string, env []string, args ...string) (*Proc, error) {
	ps.mu.Lock()
	ps.seq++
	logPath := filepath.Join(ps.LogDir, fmt.Sprintf("%s.%d.log", name, ps.seq))
	ps.mu.Unlock()
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	// If the test binary dies without cleanup, the kernel kills the child.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { // owned by p: ends when the process is reaped
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	ps.mu.Lock()
	ps.list = append(ps.list, p)
	ps.mu.Unlock()
	fmt.Fprintf(ps.Out, "harness: started %s pid %d, log %s\n", name, p.PID(), logPath)
	return p, nil
}

// Close stops every process, newest first.
func (ps *Procs) Close() error {
	ps.mu.Lock()
	list := ps.list
	ps.list = nil
	ps.mu.Unlock()
	var errs []error
	for i := len(list) - 1; i >= 0; i-- {
		errs = append(errs, list[i].Stop(10*time.Second))
	}
	return errors.Join(errs...)
}

// WaitFor polls cond every 50 ms until it returns nil, the process exits or
// timeout passes; the last error explains a timeout.
func WaitFor(ctx context.Context, p *Proc, timeout time.Duration, cond func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		err := cond(ctx)
		if err == nil {
			return nil
		}
		var exited <-chan struct{}
		if p != nil {
			exited = p.done
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited (%v), see %s: last check: %w", p.Name, p.err, p.LogPath, err)
		case <-ctx.Done():
			return fmt.Errorf("waiting: %w: last check: %w", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreeAddr returns "127.0.0.1:<free port>".
func FreeAddr() (string, error) {
	port, err := FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// dialTCP succeeds once something accepts connections on addr.
func dialTCP(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}
