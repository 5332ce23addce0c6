// Command wirekube-demo runs the whole WireKube relay gateway on this
// machine: `make demo` (checks, attacks, a report, then everything stops)
// and `make up` (--up: the same stack until Ctrl-C). See docs/demo.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/wirekube/relay-ws/demo"
	"github.com/wirekube/relay-ws/internal/cli"
	"github.com/wirekube/relay-ws/internal/version"
)

func main() { os.Exit(cli.Main("wirekube-demo", run, exitCode)) }

// exitCode is 2 for a usage error, 1 for any other.
func exitCode(err error) int {
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

var errUsage = errors.New("usage")

// run writes the help, the progress and the report to out (stdout).
func run(ctx context.Context, args []string, out, _ io.Writer) error {
	o := demo.DefaultOptions()
	o.Progress = out
	fs := flag.NewFlagSet("wirekube-demo", flag.ContinueOnError)
	fs.SetOutput(out)
	o.AddFlags(fs)
	up := fs.Bool("up", false, "keep the stack running until Ctrl-C instead of running the checks")
	showVersion := version.AddFlag(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *showVersion {
		return version.Print(out, "wirekube-demo")
	}
	cfg, err := o.Complete()
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *up {
		return runUp(ctx, cfg, out)
	}
	rep, err := demo.Run(ctx, cfg)
	if werr := rep.WriteText(out); werr != nil {
		err = errors.Join(err, werr)
	}
	return err
}

// runUp serves until ctx ends (SIGINT or SIGTERM); a stack that came up and
// was stopped by the signal is a success.
func runUp(ctx context.Context, cfg *demo.Config, out io.Writer) error {
	probe := "bin/wirekube-relay-probe"
	if cfg.BinDir != "" {
		probe = filepath.Join(cfg.BinDir, "wirekube-relay-probe")
	}
	rep, err := demo.Up(ctx, cfg, func(rep *demo.Report) {
		demo.WriteUpInstructions(out, rep, probe)
	})
	if err != nil {
		rep.WriteText(out)
		return err
	}
	fmt.Fprintln(out, "wirekube-demo: stopped; state kept in", rep.Where.StateDir)
	return nil
}
