// Package netutil holds the address parser, the Unix-socket-or-loopback
// check and the listener helper shared by the binaries.
package netutil

import (
	"fmt"
	"net"
	"os"
)

// Listen opens addr, which is host:port for TCP or unix:/path for a Unix
// socket (ParseAddr). A stale socket file at path is removed first: the
// caller owns it.
func Listen(addr string) (net.Listener, error) {
	network, address, err := ParseAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %w", addr, err)
	}
	if network == "unix" {
		if err := os.Remove(address); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("listen %q: remove stale socket: %w", addr, err)
		}
	}
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %w", addr, err)
	}
	return ln, nil
}
