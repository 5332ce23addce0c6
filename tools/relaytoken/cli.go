package relaytoken

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/wirekube/relay-ws/internal/cli/output"
	"github.com/wirekube/relay-ws/internal/logging"
	"github.com/wirekube/relay-ws/internal/version"
)

const usageText = `usage: wirekube-relay-token COMMAND [flags]

Commands:
  issue   --peer NAME (--secret NAME | --token-file FILE|-) [--duration 1h] [--allow-missing-peer]
  list    [-A|--all-namespaces] [-o text|json|yaml]
  revoke  --peer NAME
  version (or --version) prints the version

Every command takes --kubeconfig, --context and -n/--namespace (default: the
kubeconfig context's namespace, else wirekube-system). "issue --output FILE" is
the deprecated spelling of --token-file (it warns; removed in the next release).
Run "wirekube-relay-token COMMAND -h" for its flags.
`

// ClientFactory builds the API clients; tests pass fakes.
type ClientFactory func(KubeOptions) (Clients, error)

// Command is wirekube-relay-token: args exclude the program name. Reports
// go to stdout, except with `issue --token-file -`, where stdout carries only
// the token and the report goes to stderr.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return command(ctx, args, stdout, stderr, NewClients, time.Now)
}

func command(ctx context.Context, args []string, stdout, stderr io.Writer, newClients ClientFactory, now func() time.Time) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return fmt.Errorf("%w: a command is required", ErrUsage)
	}
	c := cli{stdout: stdout, stderr: stderr, newClients: newClients, now: now}
	switch args[0] {
	case "issue":
		return c.issue(ctx, args[1:])
	case "list":
		return c.list(ctx, args[1:])
	case "revoke":
		return c.revoke(ctx, args[1:])
	case "--version", "-version", "version":
		return version.Print(stdout, "wirekube-relay-token")
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usageText)
		return nil
	default:
		fmt.Fprint(stderr, usageText)
		return fmt.Errorf("%w: unknown command %q", ErrUsage, args[0])
	}
}

type cli struct {
	stdout, stderr io.Writer
	newClients     ClientFactory
	now            func() time.Time
	kube           KubeOptions
	namespace      string
	logLevel       string
}

// flags returns a flag set with the kubectl-like flags every command has.
func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("wirekube-relay-token "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.StringVar(&c.kube.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	fs.StringVar(&c.kube.Context, "context", "", "kubeconfig context (default: the current context)")
	fs.StringVar(&c.namespace, "namespace", "", "namespace of the ServiceAccounts and Secrets (default: the kubeconfig context's, else "+DefaultNamespace+")")
	fs.StringVar(&c.namespace, "n", "", "shorthand for --namespace")
	fs.StringVar(&c.logLevel, "log-level", logging.DefaultLevel, "level of the diagnostic lines on stderr (debug: the kubeconfig context and namespace used): debug, info, warn or error")
	return fs
}

// resolveNamespace is -n when given, else the kubeconfig context's
// namespace, else DefaultNamespace. A namespace taken from the context is
// said on stderr: the gateway accepts per-peer ServiceAccounts only in its
// --peer-namespace.
func (c *cli) resolveNamespace(cl Clients, announce bool) string {
	switch {
	case c.namespace != "":
		return c.namespace
	case cl.Namespace != "":
		if announce {
			fmt.Fprintf(c.stderr, "using namespace %s from the kubeconfig context (the gateway accepts per-peer ServiceAccounts only in its --peer-namespace, default %s)\n",
				cl.Namespace, DefaultNamespace)
		}
		return cl.Namespace
	default:
		return DefaultNamespace
	}
}

// parse parses args; flag errors are usage errors.
func (c *cli) parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if _, err := logging.ParseLevel(c.logLevel); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (every input is a flag)", ErrUsage, fs.Arg(0))
	}
	return nil
}

// tool builds the API clients; called after the flags were validated, so
// a usage error never waits for a kubeconfig.
func (c *cli) tool() (*Tool, error) {
	cl, err := c.newClients(c.kube)
	if err != nil {
		return nil, err
	}
	if log, err := logging.New(c.stderr, "text", c.logLevel); err == nil {
		log.Debug("clients ready", "kubeconfig", c.kube.Kubeconfig, "context", c.kube.Context,
			"context_namespace", cl.Namespace, "namespace_flag", c.namespace)
	}
	return &Tool{Clients: cl}, nil
}

func (c *cli) issue(ctx context.Context, args []string) error {
	var o IssueOptions
	fs := c.flags("issue")
	o.AddFlags(fs, c.stderr)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	o.Namespace = c.namespace
	if err := o.Validate(); err != nil {
		return err
	}
	t, err := c.tool()
	if err != nil {
		return err
	}
	o.Namespace = c.resolveNamespace(t.Clients, true)
	report := c.stdout
	if o.TokenFile == "-" {
		report = c.stderr // stdout carries the token alone
	}
	res, err := t.Issue(ctx, o, c.stdout)
	if err != nil {
		return err
	}
	c.printIssued(report, res)
	return nil
}

func (c *cli) printIssued(w io.Writer, r Issued) {
	if r.PeerMissing {
		fmt.Fprintf(w, "warning: WireKubePeer %q does not exist (or could not be read); the gateway refuses the token until it does\n", r.Peer)
	}
	fmt.Fprintf(w, "ServiceAccount %s/%s %s\n", r.Namespace, r.ServiceAccount, r.SAAction)
	left := r.Expires.Sub(c.now()).Round(time.Second)
	fmt.Fprintf(w, "token for peer %s written to %s\n", r.Peer, r.Destination)
	fmt.Fprintf(w, "expires %s (in %s)\n", r.Expires.Format(time.RFC3339), left)
	if d := left - r.Requested; d > time.Minute || d < -time.Minute {
		fmt.Fprintf(w, "note: the API server chose this lifetime; %s was requested\n", r.Requested)
	}
}

func (c *cli) list(ctx context.Context, args []string) error {
	fs := c.flags("list")
	all := fs.Bool("all-namespaces", false, "list managed ServiceAccounts in every namespace")
	fs.BoolVar(all, "A", false, "shorthand for --all-namespaces")
	format := output.Text
	output.AddFlag(fs, &format)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if err := output.Check(format); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if *all && c.namespace != "" {
		return fmt.Errorf("%w: --all-namespaces and --namespace exclude each other", ErrUsage)
	}
	t, err := c.tool()
	if err != nil {
		return err
	}
	ns := ""
	if !*all {
		ns = c.resolveNamespace(t.Clients, false)
	}
	entries, err := t.List(ctx, ns)
	if err != nil {
		return err
	}
	return output.Write(c.stdout, format, ListOutput{Items: entries}, func(w io.Writer) error {
		return WriteList(w, entries, c.now())
	})
}

func (c *cli) revoke(ctx context.Context, args []string) error {
	fs := c.flags("revoke")
	peer := fs.String("peer", "", "WireKubePeer name (required)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if err := ValidatePeer(*peer); err != nil {
		return err
	}
	t, err := c.tool()
	if err != nil {
		return err
	}
	res, err := t.Revoke(ctx, c.resolveNamespace(t.Clients, true), *peer)
	if err != nil {
		return err
	}
	if res.ServiceAccount != "" {
		fmt.Fprintf(c.stdout, "deleted ServiceAccount %s/%s\n", res.Namespace, res.ServiceAccount)
	}
	for _, s := range res.Secrets {
		fmt.Fprintf(c.stdout, "deleted Secret %s/%s\n", res.Namespace, s)
	}
	fmt.Fprintln(c.stdout, revokeNotice)
	return nil
}

// ExitCode maps an error of Command to the process exit code: 0 ok,
// 2 usage (bad flag or peer name), 1 anything else.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrUsage), errors.Is(err, ErrInvalidPeer), errors.Is(err, flag.ErrHelp):
		return 2
	default:
		return 1
	}
}
