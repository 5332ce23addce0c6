// Command wirekube-e2e-deps builds the binaries the e2e suite runs from the
// Go module proxy into e2e/.cache/ (kube-apiserver, etcd, traefik) when they
// are missing. .ci/run starts it in the background at low priority so that
// a cold machine compiles them while lint and the unit tests run; the suite
// waits on the same cache lock and finds them built.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/wirekube/relay-ws/internal/test/stack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wirekube-e2e-deps:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	root, err := stack.RepoRoot()
	if err != nil {
		return err
	}
	if _, err := stack.FindKubeBinaries(ctx, root, os.Stdout); err != nil {
		return err
	}
	_, err = stack.FindTraefik(ctx, root, os.Stdout)
	return err
}
