// Command wirekube-relay-probe checks a WireKube relay gateway the way an
// agent connects to it and reports each stage. See docs/tools.md.
package main

import (
	"context"
	"io"
	"os"

	"github.com/wirekube/relay-ws/internal/cli"
	"github.com/wirekube/relay-ws/tools/probe"
)

func main() { os.Exit(cli.Main("wirekube-relay-probe", run, probe.ExitCode)) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return probe.Command(ctx, args, stdout, stderr)
}
