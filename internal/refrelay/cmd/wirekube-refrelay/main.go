// Command wirekube-refrelay is a TEST FIXTURE: the reference raw WireKube
// relay used by the tests, the benchmark and the local demo. It is not the
// production relay and is never shipped in an image. See docs/refrelay.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/wirekube/relay-ws/internal/cli"
	"github.com/wirekube/relay-ws/internal/logging"
	"github.com/wirekube/relay-ws/internal/netutil"
	"github.com/wirekube/relay-ws/internal/refrelay"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wirekube-refrelay:", err)
		os.Exit(1)
	}
}

const usage = `wirekube-refrelay: TEST FIXTURE, not for production.

A reference implementation of the raw WireKube relay (v0.0.17 frame protocol)
for tests, the benchmark and the local demo. No authentication: any client
may register any key. Control first frames (0x10, 0x11, 0x13) are refused
with an Error frame. SIGINT or SIGTERM stops it.

Flags:
`

// run parses args, serves until ctx is done, and returns nil on a clean stop.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("wirekube-refrelay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	listen := fs.String("listen", "127.0.0.1:3478", "TCP host:port (a UDP socket is opened on the same address) or unix:/path")
	logFormat := fs.String("log-format", "json", "log format: json or text")
	var opts refrelay.Options
	fs.IntVar(&opts.QueueDepth, "queue-depth", refrelay.DefaultQueueDepth, "frames queued per destination before the newest is dropped")
	fs.DurationVar(&opts.WriteStallTimeout, "write-stall-timeout", refrelay.DefaultWriteStallTimeout, "disconnect a peer whose write blocks this long")
	fs.BoolVar(&opts.DisableUDP, "no-udp", false, "do not open the UDP socket next to the TCP listener")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	log, err := logging.New(stderr, *logFormat, "log-format")
	if err != nil {
		return err
	}
	if opts.QueueDepth <= 0 || opts.WriteStallTimeout <= 0 {
		return fmt.Errorf("--queue-depth and --write-stall-timeout must be positive")
	}
	opts.Logger = log.With("component", "refrelay", "fixture", true)
	srv, err := refrelay.New(opts)
	if err != nil {
		return err
	}
	ln, err := netutil.Listen(*listen)
	if err != nil {
		return err
	}
	start := time.Now()
	err = srv.Serve(ctx, ln)
	log.Info("reference relay stopped", "uptime", time.Since(start), slog.Any("stats", srv.Stats()))
	return err
}
