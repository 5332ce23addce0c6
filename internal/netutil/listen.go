// Package netutil holds the listener helper shared by the binaries.
package netutil

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// Listen opens addr, which is host:port for TCP or unix:/path for a Unix
// socket. A stale socket file at path is removed first: the caller owns it.
func Listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if path == "" {
			return nil, fmt.Errorf("listen %q: empty unix socket path", addr)
		}
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("listen %q: remove stale socket: %w", addr, err)
		}
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("listen %q: %w", addr, err)
		}
		return ln, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("listen %q: want host:port or unix:/path: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %w", addr, err)
	}
	return ln, nil
}
