// Package version is the build's version, set at link time:
//
//	go build -ldflags "-X github.com/wirekube/relay-ws/internal/version.Version=v0.1.0" ./...
//
// `make build`, `make image` and the release workflow set it to Release; a
// plain `go build` reports "dev". Every binary prints it with --version, logs it
// on its first line and exports it as the wirekube_build_info gauge.
package version

import (
	"flag"
	"fmt"
	"io"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// Version is the release this binary was built from. It is a variable only
// so the linker can set it (-X); nothing assigns it at run time.
var Version = "dev"

// Release is the version this tree is. Between releases it is the next
// version with -dev (nothing of it is published: no tag, image or chart);
// a release is the one commit where it drops -dev and CHANGELOG.md's
// Unreleased section becomes the dated section of that version, and the
// release workflow tags that commit when it lands on main. `make build` and
// `make image` stamp it into Version; the chart's appVersion and version and
// manifests/base's image tag pin it (manifests TestVersionPinned and
// TestVersionSaysWhatTheTreeIs), so a chart or kustomization from a
// checkout runs the image built from the same checkout.
const Release = "v0.3.0-dev"

// Image is the container image every binary ships in (Makefile, manifests,
// compose, the Helm chart, the release workflow), tagged with Version.
const Image = "ghcr.io/wirekube/relay-ws"

// GoVersion is the Go toolchain the binary was built with.
func GoVersion() string { return runtime.Version() }

// String is the --version line of program.
func String(program string) string {
	return fmt.Sprintf("%s %s (%s, %s/%s)", program, Version, GoVersion(), runtime.GOOS, runtime.GOARCH)
}

// AddFlag registers --version on fs; the returned bool is true when it was
// given.
func AddFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("version", false, "print the version and exit")
}

// Print writes String(program) and a newline to w.
func Print(w io.Writer, program string) error {
	_, err := fmt.Fprintln(w, String(program))
	return err
}

// NewCollector returns the wirekube_build_info{version,goversion} gauge,
// always 1, for a binary's /metrics.
func NewCollector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "wirekube_build_info",
		Help:        "Always 1; the labels name the release and the Go toolchain of this binary.",
		ConstLabels: prometheus.Labels{"version": Version, "goversion": GoVersion()},
	})
	g.Set(1)
	return g
}

// LogAttrs are the attributes of every binary's first log line.
func LogAttrs() []any {
	return []any{"version", Version, "goversion", GoVersion()}
}
