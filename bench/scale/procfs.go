package scale

import (
	"context"
	"net"
)

// tcpUp reports whether addr accepts a TCP connection.
func tcpUp(ctx context.Context, addr string) error {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}
