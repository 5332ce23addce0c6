package stack

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// TinyproxyOptions configure a real tinyproxy (Debian's) as the forward
// proxy of an agent behind a corporate proxy.
type TinyproxyOptions struct {
	// ConnectPorts are the only ports CONNECT may reach (tinyproxy
	// ConnectPort; any other answers 403). Empty: every port.
	ConnectPorts []int
	// User and Password, when set, require Basic proxy authentication
	// (tinyproxy BasicAuth; none or wrong answers 407).
	User, Password string
	// IdleTimeout is tinyproxy's Timeout in seconds: a connection, a
	// CONNECT tunnel included, with no byte either way for this long is
	// closed. Zero: 600.
	IdleTimeout int
}

// Tinyproxy is a running tinyproxy.
type Tinyproxy struct {
	Proc *Proc
	Addr string // 127.0.0.1:port
}

// URL is the proxy URL an agent's HTTPS_PROXY would hold, with the
// credentials when withAuth.
func (tp *Tinyproxy) URL(o TinyproxyOptions, withAuth bool) *url.URL {
	u := &url.URL{Scheme: "http", Host: tp.Addr}
	if withAuth && o.User != "" {
		u.User = url.UserPassword(o.User, o.Password)
	}
	return u
}

// renderTinyproxy writes the config: loopback only, logs to stderr (the
// Procs log), no pid file, the options above.
func renderTinyproxy(addr string, o TinyproxyOptions) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	timeout := o.IdleTimeout
	if timeout == 0 {
		timeout = 600
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Port %s\nListen %s\nTimeout %d\nMaxClients 100\nLogLevel Info\nAllow 127.0.0.1\n", port, host, timeout)
	for _, p := range o.ConnectPorts {
		fmt.Fprintf(&b, "ConnectPort %d\n", p)
	}
	if o.User != "" {
		if strings.ContainsAny(o.User+o.Password, " \t\r\n\"") {
			return "", fmt.Errorf("tinyproxy: user and password must be single words")
		}
		fmt.Fprintf(&b, "BasicAuth %s %s\n", o.User, o.Password)
	}
	return b.String(), nil
}

// StartTinyproxy runs /usr/bin/tinyproxy in the foreground (-d) with a
// config in dir and waits until it listens. The caller stops it through
// procs (or Proc.Stop).
func StartTinyproxy(ctx context.Context, procs *Procs, dir, name string, o TinyproxyOptions) (*Tinyproxy, error) {
	bin, err := lookBin("tinyproxy", "/usr/bin/tinyproxy", "/usr/sbin/tinyproxy")
	if err != nil {
		return nil, fmt.Errorf("tinyproxy (apt-get install tinyproxy): %w", err)
	}
	tp := &Tinyproxy{}
	err = retryPorts(ctx, procs.Out, name, func() error { return nil }, func(ctx context.Context) error {
		if err := repickAddrs(&tp.Addr); err != nil {
			return err
		}
		conf, err := renderTinyproxy(tp.Addr, o)
		if err != nil {
			return err
		}
		path, err := writeConfig(dir, name+".conf", conf)
		if err != nil {
			return err
		}
		if tp.Proc, err = procs.Start(name, bin, "-d", "-c", path); err != nil {
			return err
		}
		if err := addrInUse(tp.Proc, WaitFor(ctx, tp.Proc, startTimeout, listensOn(tp.Proc, tp.Addr))); err != nil {
			_ = tp.Proc.Stop(5 * time.Second)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tp, nil
}

// PortOf is the numeric port of a host:port address.
func PortOf(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(p)
}
