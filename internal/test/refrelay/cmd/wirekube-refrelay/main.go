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
	"time"

	"github.com/wirekube/relay-ws/internal/cli"
	"github.com/wirekube/relay-ws/internal/logging"
	"github.com/wirekube/relay-ws/internal/netutil"
	"github.com/wirekube/relay-ws/internal/test/refrelay"
	"github.com/wirekube/relay-ws/internal/version"
)

func main() { os.Exit(cli.Main("wirekube-refrelay", run, nil)) }

const usage = `wirekube-refrelay: TEST FIXTURE, not for production.

A reference implementation of the raw WireKube relay (v0.0.17 frame protocol)
for tests, the benchmark and the local demo. No authentication: any client
may register any key. Control first frames (0x10, 0x11, 0x13) are refused
with an Error frame. SIGINT or SIGTERM stops it.

Flags:
`

// options are the fixture's flags.
type options struct {
	listen    string
	logFormat string
	logLevel  string
	relay     refrelay.Options
}

// config is options after complete.
type config struct {
	listen    string
	logFormat string
	logLevel  string
	relay     refrelay.Options
}

func defaultOptions() options {
	return options{listen: "127.0.0.1:3478", logFormat: logging.DefaultFormat, logLevel: logging.DefaultLevel, relay: refrelay.Options{
		QueueDepth: refrelay.DefaultQueueDepth, WriteStallTimeout: refrelay.DefaultWriteStallTimeout}}
}

// AddFlags registers one flag per option on fs.
func (o *options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.listen, "listen", o.listen, "TCP host:port (a UDP socket is opened on the same address) or unix:/path")
	fs.StringVar(&o.logFormat, "log-format", o.logFormat, logging.FormatUsage)
	fs.StringVar(&o.logLevel, "log-level", o.logLevel, logging.LevelUsage)
	fs.IntVar(&o.relay.QueueDepth, "queue-depth", o.relay.QueueDepth, "frames queued per destination before the newest is dropped")
	fs.DurationVar(&o.relay.WriteStallTimeout, "write-stall-timeout", o.relay.WriteStallTimeout, "disconnect a peer whose write blocks this long")
	fs.BoolVar(&o.relay.DisableUDP, "no-udp", o.relay.DisableUDP, "do not open the UDP socket next to the TCP listener")
}

// Validate reports every invalid flag, each naming its flag.
func (o *options) Validate() error {
	var errs []error
	if o.listen == "" {
		errs = append(errs, errors.New("--listen: must not be empty"))
	}
	if err := logging.CheckFormat(o.logFormat); err != nil {
		errs = append(errs, err)
	}
	if _, err := logging.ParseLevel(o.logLevel); err != nil {
		errs = append(errs, err)
	}
	if o.relay.QueueDepth <= 0 {
		errs = append(errs, fmt.Errorf("--queue-depth: must be positive, got %d", o.relay.QueueDepth))
	}
	if o.relay.WriteStallTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--write-stall-timeout: must be positive, got %s", o.relay.WriteStallTimeout))
	}
	return errors.Join(errs...)
}

// Complete validates o and returns the config run serves.
func (o *options) Complete() (*config, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &config{listen: o.listen, logFormat: o.logFormat, logLevel: o.logLevel, relay: o.relay}, nil
}

// run parses args, serves until ctx is done, and returns nil on a clean stop.
// Logs go to stderr; --version prints to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("wirekube-refrelay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	o := defaultOptions()
	o.AddFlags(fs)
	showVersion := version.AddFlag(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *showVersion {
		return version.Print(stdout, "wirekube-refrelay")
	}
	cfg, err := o.Complete()
	if err != nil {
		return err
	}
	return serve(ctx, cfg, stderr)
}

// serve runs the fixture with cfg until ctx is done.
func serve(ctx context.Context, cfg *config, stderr io.Writer) error {
	log, err := logging.New(stderr, cfg.logFormat, cfg.logLevel)
	if err != nil {
		return err
	}
	log.Info("wirekube-refrelay starting", version.LogAttrs()...)
	opts := cfg.relay
	opts.Logger = log.With("component", "refrelay", "fixture", true)
	srv, err := refrelay.New(opts)
	if err != nil {
		return err
	}
	ln, err := netutil.Listen(cfg.listen)
	if err != nil {
		return err
	}
	start := time.Now()
	err = srv.Serve(ctx, ln)
	log.Info("reference relay stopped", "uptime", time.Since(start), slog.Any("stats", srv.Stats()))
	return err
}
