package admission

import (
	"errors"
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wirekube/relay-ws/internal/contract"
)

// Options name the WireKubePeer admission policy and binding extauthz
// reports on (docs/revocation.md#admission).
type Options struct {
	// PeerAdmissionPolicy is the ValidatingAdmissionPolicy's name. Default
	// the shipped wirekube-relay-gateway-peer-keys; an operator names an
	// equivalent of theirs; empty: not watched (state not_watched).
	PeerAdmissionPolicy string
	// PeerAdmissionBinding is its ValidatingAdmissionPolicyBinding's name.
	// Default wirekube-relay-gateway-peer-keys.
	PeerAdmissionBinding string
}

// Config is the parsed form of Options.
type Config struct{ Policy, Binding string }

// DefaultOptions are the shipped names.
func DefaultOptions() Options {
	return Options{PeerAdmissionPolicy: contract.DefaultPeerAdmissionPolicy,
		PeerAdmissionBinding: contract.DefaultPeerAdmissionBinding}
}

// AddFlags registers the two flags on fs, with o's values as defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.PeerAdmissionPolicy, "peer-admission-policy", o.PeerAdmissionPolicy,
		"ValidatingAdmissionPolicy that makes WireKubePeer keys node-restricted, reported as in force or not (empty: not watched)")
	fs.StringVar(&o.PeerAdmissionBinding, "peer-admission-binding", o.PeerAdmissionBinding,
		"ValidatingAdmissionPolicyBinding of --peer-admission-policy")
}

// Validate reports each bad name, naming its flag.
func (o *Options) Validate() error {
	var errs []error
	if o.PeerAdmissionPolicy != "" && len(validation.IsDNS1123Subdomain(o.PeerAdmissionPolicy)) > 0 {
		errs = append(errs, fmt.Errorf("--peer-admission-policy: not an object name: %q", o.PeerAdmissionPolicy))
	}
	switch {
	case o.PeerAdmissionPolicy != "" && o.PeerAdmissionBinding == "":
		errs = append(errs, errors.New("--peer-admission-binding: required with --peer-admission-policy"))
	case o.PeerAdmissionBinding != "" && len(validation.IsDNS1123Subdomain(o.PeerAdmissionBinding)) > 0:
		errs = append(errs, fmt.Errorf("--peer-admission-binding: not an object name: %q", o.PeerAdmissionBinding))
	}
	return errors.Join(errs...)
}

// Complete returns the parsed form of validated options.
func (o *Options) Complete() Config {
	return Config{Policy: o.PeerAdmissionPolicy, Binding: o.PeerAdmissionBinding}
}

// NoWatchList carries a clientset's "no WatchList" marker over to the
// admission client derived from it (client-go's fakes).
type NoWatchList struct{ Client }

// IsWatchListSemanticsUnSupported reports true.
func (NoWatchList) IsWatchListSemanticsUnSupported() bool { return true }
