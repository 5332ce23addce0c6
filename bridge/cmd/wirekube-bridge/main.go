// Command wirekube-bridge bridges authenticated WebSocket sessions from the
// proxy (Envoy or nginx with ext_authz) to the raw WireKube TCP relay.
package main

import (
	"context"
	"io"
	"os"

	"github.com/wirekube/relay-ws/bridge"
	"github.com/wirekube/relay-ws/internal/cli"
)

func main() { os.Exit(cli.Main("wirekube-bridge", run, nil)) }

// run parses args, builds the bridge and serves until ctx is done (SIGTERM),
// then drains. Logs go to stderr; --version prints to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts := bridge.DefaultOptions()
	if done, err := cli.ParseService("wirekube-bridge", &opts, args, stdout, stderr); done || err != nil {
		return err
	}
	cfg, err := opts.Complete()
	if err != nil {
		return err
	}
	logger, reg, err := cli.StartService("wirekube-bridge", stderr, opts.LogFormat, opts.LogLevel)
	if err != nil {
		return err
	}
	srv, err := bridge.New(cfg, logger, reg)
	if err != nil {
		return err
	}
	return srv.ListenAndRun(ctx)
}
