package cli

import (
	"flag"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/wirekube/relay-ws/internal/logging"
	"github.com/wirekube/relay-ws/internal/version"
)

// The prologue of the two services' run (wirekube-bridge,
// wirekube-extauthz): ParseService, then the service's own Complete, then
// StartService.

// FlagAdder is a service's Options: one flag per field.
type FlagAdder interface {
	AddFlags(fs *flag.FlagSet)
}

// ParseService registers opts' flags and --version on a flag set named
// name, parses args (Parse) into opts, and answers --version on stdout.
// done reports that the binary has nothing left to do (the version line
// was printed).
func ParseService(name string, opts FlagAdder, args []string, stdout, stderr io.Writer) (done bool, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts.AddFlags(fs)
	showVersion := version.AddFlag(fs)
	if err := Parse(fs, args); err != nil {
		return false, err
	}
	if *showVersion {
		return true, version.Print(stdout, name)
	}
	return false, nil
}

// StartService makes the service's logger (on stderr, with --log-format and
// --log-level), logs "<name> starting" with the build's version, and
// returns a metrics registry holding the Go, process and build-info
// collectors.
func StartService(name string, stderr io.Writer, logFormat, logLevel string) (*slog.Logger, *prometheus.Registry, error) {
	logger, err := logging.New(stderr, logFormat, logLevel)
	if err != nil {
		return nil, nil, err
	}
	logger.Info(name+" starting", version.LogAttrs()...)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		version.NewCollector())
	return logger, reg, nil
}
