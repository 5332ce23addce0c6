package netutil

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// unixPrefix marks a Unix socket address: unix:/path.
const unixPrefix = "unix:"

// ParseAddr parses the address form every listener and the revocation
// client take: host:port for TCP (the port must be present; the host may be
// empty for every interface) or unix:/path for a Unix socket. It returns
// the network and address for net.Listen and net.Dial.
func ParseAddr(addr string) (network, address string, err error) {
	if path, ok := strings.CutPrefix(addr, unixPrefix); ok {
		if path == "" {
			return "", "", errors.New("empty unix socket path")
		}
		return "unix", path, nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("want host:port or unix:/path: %w", err)
	}
	if port == "" {
		return "", "", fmt.Errorf("want host:port or unix:/path: missing port in address %q", addr)
	}
	return "tcp", addr, nil
}

// CheckFlag validates the address of flag --name with ParseAddr; the error
// names the flag. An empty value is refused unless allowEmpty (a listener
// that empty disables).
func CheckFlag(name, v string, allowEmpty bool) error {
	if v == "" {
		if allowEmpty {
			return nil
		}
		return fmt.Errorf("--%s: must not be empty", name)
	}
	if _, _, err := ParseAddr(v); err != nil {
		return fmt.Errorf("--%s: %w", name, err)
	}
	return nil
}

// UnixOrLoopback reports whether addr is unix:/path or a host:port on a
// loopback address (127.0.0.0/8, ::1, or the name localhost): an address
// only the processes of this Pod can reach. The revocation stream carries
// its secret and every binding in plaintext, so both of its ends insist on
// one. It does not check the rest of the syntax: use ParseAddr or
// CheckFlag for that.
func UnixOrLoopback(addr string) bool {
	if strings.HasPrefix(addr, unixPrefix) {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}
