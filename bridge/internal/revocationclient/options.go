package revocationclient

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/wirekube/relay-ws/internal/netutil"
)

// Default location of the revocation stream: the Unix socket and the
// secret extauthz writes into the directory the two containers share (an
// emptyDir in the Pod, docs/revocation.md).
const (
	DefaultAddr       = "unix:/run/wirekube-revocation/revocation.sock"
	DefaultSecretFile = "/run/wirekube-revocation/secret"
)

// Options are the settings of the revocation stream to extauthz
// (docs/revocation.md) and of the token-expiry close.
type Options struct {
	// RevocationAddr is extauthz's --revocation-listen (unix:/path or a
	// loopback host:port) for the revocation Watch stream
	// (docs/revocation.md). Default DefaultAddr, a Unix socket in
	// the directory the Pod's two containers share. Empty turns revocation
	// off (and with it the readiness gate on the stream): live sessions then
	// end on token expiry only, whatever happens to their Pod, Node,
	// ServiceAccount or WireKubePeer. Dangerous; for tests and embedders.
	RevocationAddr string
	// RevocationSecretFile holds the secret extauthz writes at every start;
	// the bridge reads it at every (re)connect and sends it with the Watch
	// call. Default DefaultSecretFile. Required with
	// RevocationAddr.
	RevocationSecretFile string
	// RevocationUnreadyAfter is how long the stream may be out of sync
	// (after it was in sync once) before /readyz fails and upgrades are
	// refused with 503 revocation_unavailable; before the first sync both
	// hold from the start. Default 10s: a restarting extauthz resyncs
	// within it, and it is well under RevocationStaleTimeout, so the
	// Service sends agents to another replica before this one would close
	// sessions as revocation_stale. At most RevocationStaleTimeout.
	RevocationUnreadyAfter time.Duration
	// RevocationStaleTimeout is how long a live session stays open while
	// the revocation stream is not in sync (extauthz restarting or
	// unreachable); then it is closed with 1008 revocation_stale. New
	// sessions are judged by extauthz as always. Default 60s.
	RevocationStaleTimeout time.Duration
	// TokenExpiryGrace keeps a session open this long past its token's
	// expiry (1008 token_expired). Default 0: a session never outlives its
	// token. Raise it only for agents that reconnect on a token refresh
	// rather than before expiry, or for clock skew between extauthz and
	// the bridge.
	TokenExpiryGrace time.Duration
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		RevocationAddr:         DefaultAddr,
		RevocationSecretFile:   DefaultSecretFile,
		RevocationUnreadyAfter: 10 * time.Second,
		RevocationStaleTimeout: 60 * time.Second,
	}
}

// AddFlags registers one flag per field on fs, with o's current values as
// defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.RevocationAddr, "revocation-addr", o.RevocationAddr, "extauthz's --revocation-listen, the revocation stream (unix:/path or a loopback host:port); empty turns revocation of live sessions off")
	fs.StringVar(&o.RevocationSecretFile, "revocation-secret-file", o.RevocationSecretFile, "file holding the secret extauthz writes for the revocation stream (read at every connect)")
	fs.DurationVar(&o.RevocationUnreadyAfter, "revocation-unready-after", o.RevocationUnreadyAfter, "fail /readyz and refuse upgrades (503 revocation_unavailable) once the revocation stream has been out of sync this long (at most --revocation-stale-timeout)")
	fs.DurationVar(&o.RevocationStaleTimeout, "revocation-stale-timeout", o.RevocationStaleTimeout, "close live sessions (1008 revocation_stale) after the revocation stream was out of sync this long")
	fs.DurationVar(&o.TokenExpiryGrace, "token-expiry-grace", o.TokenExpiryGrace, "keep a session open this long past its token's expiry (1008 token_expired)")
}

// Validate reports every invalid setting, each error naming its flag.
func (o *Options) Validate() error {
	var errs []error
	if err := netutil.CheckFlag("revocation-addr", o.RevocationAddr, true); err != nil {
		errs = append(errs, err)
	} else if o.RevocationAddr != "" && !netutil.UnixOrLoopback(o.RevocationAddr) {
		errs = append(errs, fmt.Errorf("--revocation-addr: want unix:/path or a loopback host:port, got %q: the stream must not leave the Pod", o.RevocationAddr))
	}
	errs = append(errs, o.validateStream()...)
	if o.RevocationStaleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--revocation-stale-timeout: must be positive, got %s", o.RevocationStaleTimeout))
	}
	if o.TokenExpiryGrace < 0 {
		errs = append(errs, fmt.Errorf("--token-expiry-grace: must not be negative, got %s", o.TokenExpiryGrace))
	}
	return errors.Join(errs...)
}

// validateStream checks the secret file and the readiness bound against
// the rest of the revocation settings.
func (o *Options) validateStream() []error {
	if o.RevocationAddr == "" {
		return nil // revocation off: nothing to reach
	}
	var errs []error
	if o.RevocationSecretFile == "" {
		errs = append(errs, errors.New("--revocation-secret-file: required with --revocation-addr"))
	}
	if o.RevocationUnreadyAfter <= 0 || o.RevocationUnreadyAfter > o.RevocationStaleTimeout {
		errs = append(errs, fmt.Errorf("--revocation-unready-after: want a positive duration of at most --revocation-stale-timeout (%s), got %s",
			o.RevocationStaleTimeout, o.RevocationUnreadyAfter))
	}
	return errs
}
