package probe

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/wirekube/relay-ws/internal/contract"
)

// Command is wirekube-relay-probe: it parses args (without the program
// name), probes, writes the report to stdout and returns an error whose
// ExitCode is the process exit code (nil when every stage passed). Usage
// errors go to stderr.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o Options
	fs := flag.NewFlagSet("wirekube-relay-probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.URL, "url", "", "relay endpoint, wss://HOST[:PORT]/relay or ws://... (required)")
	fs.StringVar(&o.TokenFile, "token-file", contract.AgentTokenPath, "file holding the bearer token (trimmed, never printed); empty sends no token")
	fs.StringVar(&o.PublicKey, "public-key", "", "WireGuard public key to register (base64)")
	fs.StringVar(&o.PrivateKeyFile, "private-key-file", "", "WireGuard private key file (base64); the public key is derived from it")
	fs.StringVar(&o.CAFile, "ca-file", "", "PEM CA bundle to verify the gateway with instead of the system roots")
	fs.BoolVar(&o.InsecureSkipVerify, "insecure-skip-verify", false, "do not verify the gateway certificate (dangerous: the token goes to whoever answers)")
	fs.DurationVar(&o.Timeout, "timeout", DefaultTimeout, "limit for connecting (DNS to upgrade) and for each echo round trip")
	fs.IntVar(&o.Count, "count", DefaultCount, "number of echo round trips through the relay")
	fs.StringVar(&o.Output, "output", "text", "report format: text or json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return &ExitError{Code: ExitUsage, Err: err}
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q (every input is a flag)", fs.Arg(0))
	}
	return Run(ctx, o, stdout)
}

// Run probes with o and writes the report to w. The returned error carries
// the exit code (see ExitCode); nil means every stage passed.
func Run(ctx context.Context, o Options, w io.Writer) error {
	res, err := Check(ctx, o)
	if err != nil {
		return err
	}
	if o.Output == "json" {
		err = res.WriteJSON(w)
	} else {
		err = res.WriteText(w)
	}
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if res.OK {
		return nil
	}
	msg := "probe failed: " + res.Class
	if res.Reason != "" {
		msg += " (" + res.Reason + ")"
	}
	return &ExitError{Code: res.ExitCode, Err: errors.New(msg)}
}

// Check probes with o and returns the report for a caller that renders it
// itself (the demo, tests). The error is only for invalid options (an
// *ExitError with ExitUsage); a failed probe is a Result with OK false.
func Check(ctx context.Context, o Options) (*Result, error) {
	c, err := o.Complete()
	if err != nil {
		return nil, err
	}
	return c.Probe(ctx), nil
}
