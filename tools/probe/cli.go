package probe

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/wirekube/relay-ws/internal/cli/output"
	"github.com/wirekube/relay-ws/internal/logging"
	"github.com/wirekube/relay-ws/internal/version"
)

// Command is wirekube-relay-probe: it parses args (without the program
// name), probes, writes the report to stdout and returns an error whose
// ExitCode is the process exit code (nil when every stage passed). Usage
// errors go to stderr.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "sessions" {
		return sessionsCommand(ctx, args[1:], stdout, stderr)
	}
	o := DefaultOptions()
	fs := flag.NewFlagSet("wirekube-relay-probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: wirekube-relay-probe --url URL [flags]  (is this node able to use the gateway?)\n"+
			"       wirekube-relay-probe sessions [flags]  (who is connected: wirekube-relay-probe sessions -h)\n")
		fs.PrintDefaults()
	}
	o.AddFlags(fs)
	showVersion := version.AddFlag(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return &ExitError{Code: ExitUsage, Err: err}
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q (every input is a flag)", fs.Arg(0))
	}
	if *showVersion {
		return version.Print(stdout, "wirekube-relay-probe")
	}
	if isSet(fs, "count") && !o.Register {
		return usageErrorf("--count: only with --register (the check mode sends no echo)")
	}
	cfg, err := o.Complete()
	if err != nil {
		return err
	}
	level := o.LogLevel
	if level == "" {
		level = logging.DefaultLevel
	}
	if cfg.log, err = logging.New(stderr, "text", level); err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	return Run(ctx, cfg, stdout)
}

// Run probes with the completed cfg and writes the report to w. The
// returned error carries the exit code (see ExitCode); nil means every
// stage passed.
func Run(ctx context.Context, cfg *Config, w io.Writer) error {
	res := cfg.Probe(ctx)
	if cfg.log != nil {
		for _, s := range res.Stages {
			cfg.log.Debug("stage", "name", s.Name, "status", s.Status, "duration_ms", s.DurationMS, "detail", s.Detail)
		}
	}
	if err := output.Write(w, cfg.output, res, res.WriteText); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if res.OK {
		return nil
	}
	msg := "probe failed: " + res.Class
	if res.Reason != "" {
		msg += " (" + res.Reason + ")"
	}
	return &ExitError{Code: res.ExitCode, Err: errors.New(msg)}
}

// isSet reports whether flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
