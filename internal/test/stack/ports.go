package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PortAttempts bounds the starts of one component whose port was taken
// between FreePort closing its probe listener and the child binding it.
const PortAttempts = 3

// restartRetryDelay is the pause before a restart retries the same port.
const restartRetryDelay = time.Second

// errAddrInUse marks a start that failed because a port it was given was
// taken by another process in the meantime.
var errAddrInUse = errors.New("port taken before the child bound it")

// addrInUse wraps err with errAddrInUse when the start failed because of a
// taken port: err says EADDRINUSE, or the child exited before it was ready
// and its log says "address already in use" (Go, etcd, kube-apiserver) or
// nginx's "(98: Address already in use)". Any other failure is returned as is.
func addrInUse(p *Proc, err error) error {
	if err == nil || errors.Is(err, errAddrInUse) {
		return err
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: %w", errAddrInUse, err)
	}
	if p == nil {
		return err
	}
	select {
	case <-p.done:
	default:
		return err // still running: not a bind failure
	}
	b, rerr := os.ReadFile(p.LogPath)
	if rerr != nil {
		return err
	}
	if bytes.Contains(bytes.ToLower(b), []byte("address already in use")) {
		return fmt.Errorf("%w: %w", errAddrInUse, err)
	}
	return err
}

// retryPorts runs start up to PortAttempts times while it fails with
// errAddrInUse, logging each retry to out. Before a retry it calls repick,
// which picks fresh ports for a first start (nothing has read the old ones
// yet); a restart passes a nil repick, because the other components already
// use the address, and waits a moment for the port to be released instead
// (a client connection's local port is the usual transient holder).
func retryPorts(ctx context.Context, out io.Writer, name string, repick func() error, start func(context.Context) error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = start(ctx)
		if err == nil || !errors.Is(err, errAddrInUse) || attempt == PortAttempts {
			break
		}
		how := "the same ports (restart) in " + restartRetryDelay.String()
		if repick != nil {
			if perr := repick(); perr != nil {
				return errors.Join(err, perr)
			}
			how = "fresh ports"
		}
		fmt.Fprintf(out, "harness: %s: a port was taken (attempt %d/%d: %v); retrying with %s\n",
			name, attempt, PortAttempts, err, how)
		if repick == nil {
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(restartRetryDelay):
			}
		}
	}
	if err != nil && errors.Is(err, errAddrInUse) {
		return fmt.Errorf("%s: gave up after %d attempts: %w", name, PortAttempts, err)
	}
	return err
}

// repickAddrs sets every address to a fresh "127.0.0.1:<port>".
func repickAddrs(addrs ...*string) error {
	for _, a := range addrs {
		var err error
		if *a, err = FreeAddr(); err != nil {
			return err
		}
	}
	return nil
}

// listensOn is the readiness check for a child that only opens a TCP port:
// addr accepts connections AND the listening socket belongs to p. A dial
// alone would also succeed when another process holds the port, and the
// child, failing to bind it, would be taken for ready (Linux: /proc).
func listensOn(p *Proc, addr string) func(context.Context) error {
	return func(context.Context) error {
		if err := dialTCP(addr); err != nil {
			return err
		}
		_, portStr, err := net.SplitHostPort(addr)
		if err != nil {
			return err
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil {
			return fmt.Errorf("port of %s: %w", addr, err)
		}
		inodes, err := listenInodes(port)
		if err != nil {
			return err
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.PID()))
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		for _, fd := range fds {
			link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.PID(), fd.Name()))
			if err == nil && inodes[link] {
				return nil
			}
		}
		return fmt.Errorf("%s accepts connections, but not on a socket of %s (pid %d)", addr, p.Name, p.PID())
	}
}

// listenInodes returns the sockets ("socket:[inode]", as /proc/<pid>/fd
// links name them) listening on TCP port, from /proc/net/tcp and tcp6.
func listenInodes(port uint64) (map[string]bool, error) {
	want := fmt.Sprintf(":%04X", port)
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listening sockets: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) < 10 || f[3] != "0A" || !strings.HasSuffix(f[1], want) {
				continue
			}
			inodes["socket:["+f[9]+"]"] = true
		}
	}
	return inodes, nil
}
