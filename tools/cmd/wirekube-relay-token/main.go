// Command wirekube-relay-token issues, lists and revokes per-peer relay
// tokens. See docs/tools.md.
package main

import (
	"context"
	"io"
	"os"

	"github.com/wirekube/relay-ws/internal/cli"
	"github.com/wirekube/relay-ws/tools/relaytoken"
)

func main() { os.Exit(cli.Main("wirekube-relay-token", run, relaytoken.ExitCode)) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return relaytoken.Command(ctx, args, stdout, stderr)
}
