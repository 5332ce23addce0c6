// Package refrelaytest starts the reference relay TEST FIXTURE
// (package refrelay) on a loopback port for the duration of a test.
package refrelaytest

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/test/refrelay"
	"github.com/wirekube/relay-ws/relayproto"
)

// Start serves a refrelay.Server on 127.0.0.1 (a free port) until the test
// ends, and returns it with its "host:port" address. A nil opts.Logger logs
// to tb.Output (shown with -v or on failure). At cleanup the server is
// stopped and every goroutine it started has ended before Start's cleanup
// returns; a Serve error fails the test.
func Start(tb testing.TB, opts refrelay.Options) (*refrelay.Server, string) {
	tb.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(tb.Output(), nil))
	}
	srv, err := refrelay.New(opts)
	if err != nil {
		tb.Fatalf("refrelaytest: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("refrelaytest: listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("refrelaytest: serve: %v", err)
		}
	})
	return srv, ln.Addr().String()
}

// Register dials addr, sends a Register frame for k, waits until srv has
// seen it, and returns the connection (closed at the end of the test).
func Register(tb testing.TB, srv *refrelay.Server, addr string, k relayproto.Key) net.Conn {
	tb.Helper()
	before := srv.RegisterCount(k)
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatalf("refrelaytest: dial: %v", err)
	}
	tb.Cleanup(func() { conn.Close() })
	if _, err := conn.Write(relayproto.AppendRegister(nil, k)); err != nil {
		tb.Fatalf("refrelaytest: register: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.WaitRegisterCount(ctx, k, before+1); err != nil {
		tb.Fatalf("refrelaytest: key %s not registered: %v", k, err)
	}
	return conn
}
