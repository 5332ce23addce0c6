// Command wirekube-relay-probe checks a WireKube relay gateway the way an
// agent connects to it and reports each stage. See docs/tools.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/wirekube/relay-ws/tools/probe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wirekube-relay-probe:", err)
	}
	os.Exit(probe.ExitCode(err))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return probe.Command(ctx, args, stdout, stderr)
}
