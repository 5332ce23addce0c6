package bridge

import (
	"errors"
	"fmt"
)

// Default location of the revocation stream: the Unix socket and the
// secret extauthz writes into the directory the two containers share (an
// emptyDir in the Pod, docs/revocation.md).
const (
	DefaultRevocationAddr       = "unix:/run/wirekube-revocation/revocation.sock"
	DefaultRevocationSecretFile = "/run/wirekube-revocation/secret"
)

// validateStream checks the secret file and the readiness bound against
// the rest of the revocation settings.
func (o *RevocationOptions) validateStream() []error {
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
