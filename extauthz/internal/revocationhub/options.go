package revocationhub

import (
	"errors"
	"flag"
	"fmt"

	"github.com/wirekube/relay-ws/internal/netutil"
)

// Default location of the revocation listener: a Unix socket and its
// secret in a directory only extauthz and the bridge mount (an emptyDir in
// the Pod, docs/revocation.md).
const (
	DefaultListen     = "unix:/run/wirekube-revocation/revocation.sock"
	DefaultSecretFile = "/run/wirekube-revocation/secret"
)

// Options configure the revocation Watch listener (docs/revocation.md).
// It is separate from the ext_authz listener: only the bridge of this Pod
// may reach it, and only with the secret.
type Options struct {
	// RevocationListen is unix:/path (default DefaultListen) or a
	// loopback host:port; empty turns the Watch stream off. Never a
	// routable address: the stream trusts its caller's list.
	RevocationListen string
	// RevocationSecretFile is where extauthz writes the fresh secret of
	// this process at start (mode 0640); the bridge reads it. Default
	// DefaultSecretFile.
	RevocationSecretFile string
	// RevocationMaxStreams bounds concurrent Watch streams; beyond it a
	// stream is refused (ResourceExhausted). Default 4: one bridge per Pod,
	// plus a restarted one whose old stream has not ended yet.
	RevocationMaxStreams int
	// RevocationMaxBindings bounds the bindings watched on one stream; an
	// Add beyond it is revoked at once (1008 revocation_limit). Keep it at
	// or above the bridge's --max-sessions. Default 20000 (that default).
	RevocationMaxBindings int
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		RevocationListen:      DefaultListen,
		RevocationSecretFile:  DefaultSecretFile,
		RevocationMaxStreams:  4,
		RevocationMaxBindings: 20000,
	}
}

// AddFlags registers the revocation listener flags on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.RevocationListen, "revocation-listen", o.RevocationListen, "revocation Watch listener for the bridge of this Pod: unix:/path or a loopback host:port; empty turns it off")
	fs.StringVar(&o.RevocationSecretFile, "revocation-secret-file", o.RevocationSecretFile, "file extauthz writes the per-start secret of the revocation listener to (the bridge reads it)")
	fs.IntVar(&o.RevocationMaxStreams, "revocation-max-streams", o.RevocationMaxStreams, "maximum concurrent revocation streams (refused beyond)")
	fs.IntVar(&o.RevocationMaxBindings, "revocation-max-bindings", o.RevocationMaxBindings, "maximum bindings watched on one revocation stream (1008 revocation_limit beyond); at least the bridge's --max-sessions")
}

// Validate reports every invalid field (errors.Join), each error naming
// its flag.
func (o *Options) Validate() error {
	var errs []error
	if err := checkRevocationListen(o.RevocationListen); err != nil {
		errs = append(errs, err)
	}
	if o.RevocationListen != "" && o.RevocationSecretFile == "" {
		errs = append(errs, errors.New("--revocation-secret-file: required with --revocation-listen"))
	}
	if o.RevocationMaxStreams < 1 {
		errs = append(errs, fmt.Errorf("--revocation-max-streams: must be at least 1, got %d", o.RevocationMaxStreams))
	}
	if o.RevocationMaxBindings < 1 {
		errs = append(errs, fmt.Errorf("--revocation-max-bindings: must be at least 1, got %d", o.RevocationMaxBindings))
	}
	return errors.Join(errs...)
}

// checkRevocationListen accepts unix:/path and loopback host:port only.
func checkRevocationListen(v string) error {
	if v == "" {
		return nil
	}
	if err := netutil.CheckFlag("revocation-listen", v, false); err != nil {
		return err
	}
	if !netutil.UnixOrLoopback(v) {
		return fmt.Errorf("--revocation-listen: want unix:/path or a loopback address (127.0.0.1, ::1, localhost), got %q: the stream must be reachable only from the bridge's Pod", v)
	}
	return nil
}
