package probe

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/wirekube/relay-ws/internal/cli/output"
	"github.com/wirekube/relay-ws/internal/contract"
)

// The sessions subcommand: who is connected, gathered from every gateway
// Pod's bridge listing (/debug/sessions, bridge --debug-sessions) through
// the API server's Pod proxy with the user's kubeconfig
// (docs/tools.md#sessions).

// Defaults of the sessions subcommand: the Pod label and the bridge's
// metrics port name of manifests/base and the chart.
const (
	DefaultGatewayNamespace = "wirekube-system"
	DefaultGatewaySelector  = "app.kubernetes.io/name=wirekube-relay-gateway"
	DefaultBridgePort       = "bridge-metrics"
)

// SessionsOptions are the flags of wirekube-relay-probe sessions.
type SessionsOptions struct {
	Kubeconfig, Context string
	// Namespace of the gateway Pods; empty: the kubeconfig context's, else
	// DefaultGatewayNamespace.
	Namespace string
	Selector  string // label selector of the gateway Pods
	Port      string // the bridge's metrics port: a container port name or number
	AuthzPort string // extauthz's metrics port (sessions_admission.go); empty: not read
	Peer      string // only this WireKubePeer; empty: every peer
	// EveryPeer also lists the agent WireKubePeers and fails (exit 11)
	// while one of them holds no live session: the lock-down evidence.
	EveryPeer bool
	Output    string
	Timeout   time.Duration // the whole gathering
}

func (o *SessionsOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	fs.StringVar(&o.Context, "context", "", "kubeconfig context (default: the current context)")
	fs.StringVar(&o.Namespace, "namespace", "", "namespace of the gateway Pods (default: the kubeconfig context's, else "+DefaultGatewayNamespace+")")
	fs.StringVar(&o.Namespace, "n", "", "shorthand for --namespace")
	fs.StringVar(&o.Selector, "selector", DefaultGatewaySelector, "label selector of the gateway Pods")
	fs.StringVar(&o.Port, "port", DefaultBridgePort, "the bridge's --metrics-listen port in the Pod: a container port name or a number")
	fs.StringVar(&o.AuthzPort, "authz-port", DefaultAuthzPort, "extauthz's --metrics-listen port in the Pod (name or number), read for the WireKubePeer admission policy state and the WireKubeMesh relay targets; empty: not read")
	fs.StringVar(&o.Peer, "peer", "", "list only this WireKubePeer's sessions")
	fs.BoolVar(&o.EveryPeer, "every-peer", false, "also list the agents' WireKubePeers (label "+agentPeerLabel+") and exit 11 while one holds no live session")
	fs.DurationVar(&o.Timeout, "timeout", 30*time.Second, "limit for the whole gathering")
	o.Output = output.Text
	output.AddFlag(fs, &o.Output)
}

func (o *SessionsOptions) validate() error {
	var errs []error
	if err := output.Check(o.Output); err != nil {
		errs = append(errs, err)
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout: must be positive, got %s", o.Timeout))
	}
	if strings.TrimSpace(o.Selector) == "" {
		errs = append(errs, errors.New("--selector: must not be empty (it would list every Pod of the namespace)"))
	}
	if _, err := strconv.Atoi(o.Port); err != nil && !validPortName(o.Port) {
		errs = append(errs, fmt.Errorf("--port: want a container port name or number, got %q", o.Port))
	}
	if _, err := strconv.Atoi(o.AuthzPort); err != nil && o.AuthzPort != "" && !validPortName(o.AuthzPort) {
		errs = append(errs, fmt.Errorf("--authz-port: want a container port name or number, got %q", o.AuthzPort))
	}
	if o.Peer != "" && !plain(o.Peer) {
		errs = append(errs, fmt.Errorf("--peer: want a WireKubePeer name, got %q", o.Peer))
	}
	if o.Peer != "" && o.EveryPeer {
		errs = append(errs, errors.New("--every-peer: compares every peer's sessions; drop --peer"))
	}
	if len(errs) > 0 {
		return &ExitError{Code: ExitUsage, Err: errors.Join(errs...)}
	}
	return nil
}

// validPortName is an IANA service name as Kubernetes allows for a
// container port: 1-15 of [a-z0-9-].
func validPortName(s string) bool {
	if s == "" || len(s) > 15 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}

// sessionsCommand runs wirekube-relay-probe sessions with args (after
// the subcommand's name).
func sessionsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o SessionsOptions
	fs := flag.NewFlagSet("wirekube-relay-probe sessions", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: wirekube-relay-probe sessions [flags]\n"+
			"Lists the live sessions of every gateway Pod through the API server's Pod proxy (docs/tools.md#sessions).\n")
		fs.PrintDefaults()
	}
	o.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return &ExitError{Code: ExitUsage, Err: err}
	}
	if fs.NArg() > 0 {
		return usageErrorf("sessions: unexpected argument %q (every input is a flag)", fs.Arg(0))
	}
	if err := o.validate(); err != nil {
		return err
	}
	g, err := newKubeGatherer(o)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	rep, err := g.Gather(ctx)
	if err != nil {
		return err
	}
	if o.EveryPeer {
		// After the sessions: a peer created meanwhile counts as without
		// a session, never the other way round.
		peers, err := g.agentPeers(ctx)
		if err != nil {
			return err
		}
		rep.EveryPeer = coverage(peers, rep)
	}
	if err := output.Write(stdout, o.Output, rep, rep.WriteText); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return rep.verdict()
}

// verdict is the exit of a written report: a Pod not listed first (the
// evidence is incomplete), then a peer without a session.
func (r *SessionsReport) verdict() error {
	if failed := r.failedPods(); failed > 0 || len(r.Pods) == 0 {
		return &ExitError{Code: ExitUnavailable, Err: fmt.Errorf("sessions: %d of %d gateway Pods listed", len(r.Pods)-failed, len(r.Pods))}
	}
	if c := r.EveryPeer; c != nil && len(c.WithoutSession) > 0 {
		return &ExitError{Code: ExitPeersWithoutSession, Err: fmt.Errorf("sessions: %d of %d agent WireKubePeers hold no live session",
			len(c.WithoutSession), c.AgentPeers)}
	}
	return nil
}

// SessionsReport is the output of wirekube-relay-probe sessions.
type SessionsReport struct {
	Namespace string `json:"namespace"`
	Selector  string `json:"selector"`
	// Sessions is the number of sessions listed, over every Pod.
	Sessions int           `json:"sessions"`
	Pods     []PodSessions `json:"pods"`
	// EveryPeer is set with --every-peer.
	EveryPeer *PeerCoverage `json:"every_peer,omitempty"`
}

// PodSessions is one gateway Pod's listing, or why it has none.
type PodSessions struct {
	Pod      string                 `json:"pod"`
	Live     int                    `json:"live"`
	Sessions []contract.SessionInfo `json:"sessions"`
	Error    string                 `json:"error,omitempty"`
	// PeerAdmission is the Pod's extauthz view of the WireKubePeer
	// admission policy (contract.PeerAdmissionStates); empty: not read.
	PeerAdmission contract.PeerAdmissionState `json:"peerAdmission,omitempty"`
	// MeshRelay is the Pod's extauthz count of WireKubeMeshes per relay
	// target (contract.MeshRelayTargets, docs/extauthz.md#mesh-watch);
	// nil: not read.
	MeshRelay *MeshRelayView `json:"meshRelay,omitempty"`
}

func (r *SessionsReport) failedPods() int {
	n := 0
	for _, p := range r.Pods {
		if p.Error != "" {
			n++
		}
	}
	return n
}

// WriteText writes the report as a table, one line per session, then one
// line per Pod that could not be listed. Every string from the cluster is
// quoted unless it is plain (printable, no spaces).
func (r *SessionsReport) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tPEER\tIDENTITY\tKEY\tCLIENT ADDRESS\tSINCE\tEXPIRES\tTO RELAY\tTO CLIENT\tREQUEST ID")
	for _, p := range r.Pods {
		for _, s := range p.Sessions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d B %d fr\t%d B %d fr\t%s\n", safe(p.Pod), safe(s.Peer), safe(s.Identity),
				safe(s.Key), safe(s.ClientAddress), safe(s.Since), safe(s.Expires), s.BytesToRelay, s.FramesToRelay, s.BytesToClient, s.FramesToClient, safe(s.RequestID))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	listed := 0
	for _, p := range r.Pods {
		if p.Error != "" {
			fmt.Fprintf(w, "%s: not listed: %s\n", safe(p.Pod), p.Error)
			continue
		}
		listed++
	}
	if err := r.writeAdmission(w); err != nil {
		return err
	}
	if err := r.writeMeshRelay(w); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "%d sessions on %d of %d gateway Pods (namespace %s, selector %s)\n",
		r.Sessions, listed, len(r.Pods), safe(r.Namespace), safe(r.Selector)); err != nil || r.EveryPeer == nil {
		return err
	}
	return r.EveryPeer.writeText(w)
}

// plain reports a non-empty string of printable characters without
// spaces, at most 512 bytes.
func plain(s string) bool {
	if s == "" || len(s) > 512 {
		return false
	}
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// safe is s as is when plain, "-" when empty, else quoted and escaped.
func safe(s string) string {
	switch {
	case s == "":
		return "-"
	case plain(s):
		return s
	}
	return strconv.Quote(s)
}
