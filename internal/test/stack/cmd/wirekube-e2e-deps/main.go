// Command wirekube-e2e-deps builds the binaries the e2e suite runs from the
// Go module proxy into e2e/.cache/ (kube-apiserver, etcd, traefik) when they
// are missing. .ci/run starts it in the background at low priority so that
// a cold machine compiles them while lint and the unit tests run; the suite
// waits on the same cache lock and finds them built.
package main

import (
	"context"
	"io"
	"os"

	"github.com/wirekube/relay-ws/internal/cli"
	"github.com/wirekube/relay-ws/internal/test/stack"
)

func main() { os.Exit(cli.Main("wirekube-e2e-deps", run, nil)) }

func run(ctx context.Context, _ []string, stdout, _ io.Writer) error {
	root, err := stack.RepoRoot()
	if err != nil {
		return err
	}
	if _, err := stack.FindKubeBinaries(ctx, root, stdout); err != nil {
		return err
	}
	_, err = stack.FindTraefik(ctx, root, stdout)
	return err
}
