// Package demo runs the whole gateway on one machine for `make demo` and
// `make up`: a real etcd and kube-apiserver, the WireKubePeer CRD, two Nodes
// with their agent Pods and peers, the reference relay, wirekube-extauthz,
// wirekube-bridge and a TLS front (Envoy when on PATH, else nginx), all
// started and stopped by PID through the e2e harness (internal/test/stack). `Run`
// then moves traffic between two agents, tries a handful of attacks and
// returns a Report; `Up` keeps the stack running until its context ends.
package demo

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/wirekube/relay-ws/internal/logging"
	"github.com/wirekube/relay-ws/internal/test/stack"
)

// Options configure a demo run. The zero value of every field has a working
// default (see Complete, which turns Options into the Config Run and Up
// take).
type Options struct {
	// RepoRoot is the repository checkout (for the nginx config, the CRD
	// fixture and building the binaries). Default: found from the working
	// directory.
	RepoRoot string
	// StateDir holds the kubeconfig, the CA, token and key files, the logs
	// and the etcd data. It is emptied at the start of a run (never while
	// another run holds its lock) and kept afterwards. Default
	// <RepoRoot>/.demo.
	StateDir string
	// BinDir holds prebuilt wirekube-refrelay, wirekube-extauthz and
	// wirekube-bridge (`make build` puts them in bin/). Default: build them
	// into StateDir/bin.
	BinDir string
	// TrafficDuration is how long the two agents stream to each other.
	// Default 3s; at most 60s (the demo stays a short, bounded load).
	TrafficDuration time.Duration
	// RoundTrips is the number of a->b->a round trips timed. Default 200.
	RoundTrips int
	// InstallNginx allows `apt-get install nginx` when no nginx is found
	// (as root only). Default true through the flag.
	InstallNginx bool
	// LogLevel is passed to wirekube-extauthz and wirekube-bridge as
	// --log-level (debug, info, warn, error). Default info.
	LogLevel string
	// Progress receives one line per thing started or built. Default
	// io.Discard.
	Progress io.Writer
}

// AddFlags registers one flag per option on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.StateDir, "state-dir", o.StateDir, "kubeconfig, CA, tokens, keys and logs (default <repo>/.demo, emptied at start)")
	fs.StringVar(&o.BinDir, "bin-dir", o.BinDir, "prebuilt wirekube-refrelay, wirekube-extauthz, wirekube-bridge (default: build into <state-dir>/bin)")
	fs.DurationVar(&o.TrafficDuration, "traffic-duration", o.TrafficDuration, "how long the two agents stream both ways (max 60s)")
	fs.IntVar(&o.RoundTrips, "round-trips", o.RoundTrips, "a->b->a round trips timed for p50/p99")
	fs.BoolVar(&o.InstallNginx, "install-nginx", o.InstallNginx, "apt-get install nginx when it is missing (root only)")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "log level of the extauthz and bridge it starts: debug, info, warn or error")
}

// DefaultOptions are the documented defaults.
func DefaultOptions() Options {
	return Options{TrafficDuration: 3 * time.Second, RoundTrips: 200, InstallNginx: true, LogLevel: logging.DefaultLevel}
}

// maxTraffic bounds the load a demo puts on a shared machine.
const maxTraffic = 60 * time.Second

// Validate checks the options that a user sets; the error names the flag.
func (o *Options) Validate() error {
	var errs []error
	if o.TrafficDuration < 0 || o.TrafficDuration > maxTraffic {
		errs = append(errs, fmt.Errorf("--traffic-duration %s: want 0 (default 3s) up to %s", o.TrafficDuration, maxTraffic))
	}
	if o.RoundTrips < 0 || o.RoundTrips > 100000 {
		errs = append(errs, fmt.Errorf("--round-trips %d: want 0 (default 200) up to 100000", o.RoundTrips))
	}
	if o.LogLevel != "" {
		if _, err := logging.ParseLevel(o.LogLevel); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Config is Options after Complete: every default filled in, the
// directories absolute. Run and Up take it.
type Config struct {
	Options
}

// Complete validates o (the same errors as Validate) and returns the
// completed Config; o itself is not changed.
func (o Options) Complete() (*Config, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := o.fill(); err != nil {
		return nil, err
	}
	return &Config{Options: o}, nil
}

// fill sets the defaults and makes the directories absolute.
func (o *Options) fill() error {
	d := DefaultOptions()
	if o.TrafficDuration == 0 {
		o.TrafficDuration = d.TrafficDuration
	}
	if o.RoundTrips == 0 {
		o.RoundTrips = d.RoundTrips
	}
	if o.LogLevel == "" {
		o.LogLevel = d.LogLevel
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.RepoRoot == "" {
		root, err := stack.RepoRoot()
		if err != nil {
			return err
		}
		o.RepoRoot = root
	}
	if o.StateDir == "" {
		o.StateDir = filepath.Join(o.RepoRoot, ".demo")
	}
	var err error
	if o.StateDir, err = filepath.Abs(o.StateDir); err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	if o.BinDir != "" {
		if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
			return fmt.Errorf("--bin-dir: %w", err)
		}
	}
	return nil
}
