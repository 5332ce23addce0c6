package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// RunFunc is a binary's run: it parses args (without the program name),
// works until ctx is done and returns why it stopped.
type RunFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// Main is the shape of every binary's main, which calls
// os.Exit(cli.Main(name, run, code)) and nothing else: run gets a context
// cancelled on SIGTERM or Interrupt, the process's arguments and streams.
// Main returns the exit code: 0 for nil or flag.ErrHelp (-h), else code(err)
// after printing "name: err" on stderr. A nil code maps every error to 1.
// The signal handler is released before Main returns, so a second signal
// during the exit kills the process as usual.
func Main(name string, run RunFunc, code func(error) int) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return exitCode(name, run(ctx, os.Args[1:], os.Stdout, os.Stderr), code, os.Stderr)
}

// exitCode is Main's verdict on err.
func exitCode(name string, err error, code func(error) int, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if code == nil {
		return 1
	}
	return code(err)
}
