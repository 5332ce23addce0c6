// Command wirekube-bridge bridges authenticated WebSocket sessions from the
// proxy (Envoy or nginx with ext_authz) to the raw WireKube TCP relay.
package main

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/wirekube/relay-ws/bridge"
	"github.com/wirekube/relay-ws/internal/cli"
	"github.com/wirekube/relay-ws/internal/logging"
	"github.com/wirekube/relay-ws/internal/version"
)

func main() { os.Exit(cli.Main("wirekube-bridge", run, nil)) }

// run parses args, builds the bridge and serves until ctx is done (SIGTERM),
// then drains. Logs go to stderr; --version prints to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts := bridge.DefaultOptions()
	fs := flag.NewFlagSet("wirekube-bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts.AddFlags(fs)
	showVersion := version.AddFlag(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *showVersion {
		return version.Print(stdout, "wirekube-bridge")
	}
	cfg, err := opts.Complete()
	if err != nil {
		return err
	}
	logger, err := logging.New(stderr, opts.LogFormat, opts.LogLevel)
	if err != nil {
		return err
	}
	logger.Info("wirekube-bridge starting", version.LogAttrs()...)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		version.NewCollector())
	srv, err := bridge.New(cfg, logger, reg)
	if err != nil {
		return err
	}
	return srv.ListenAndRun(ctx)
}
