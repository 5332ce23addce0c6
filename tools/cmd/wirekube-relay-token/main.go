// Command wirekube-relay-token issues, lists and revokes per-peer relay
// tokens. See docs/tools.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/wirekube/relay-ws/tools/relaytoken"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wirekube-relay-token:", err)
	}
	os.Exit(relaytoken.ExitCode(err))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return relaytoken.Command(ctx, args, stdout, stderr)
}
