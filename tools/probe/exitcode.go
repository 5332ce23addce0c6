package probe

import (
	"errors"
	"fmt"
)

// Exit codes of wirekube-relay-probe, one per failure class. They are part of
// the tool's contract (docs/tools.md): scripts branch on them.
const (
	ExitOK          = 0  // every stage passed
	ExitInternal    = 1  // the probe itself failed (e.g. writing the report)
	ExitUsage       = 2  // bad flag, unreadable token, key or CA file
	ExitNetwork     = 3  // DNS resolution or TCP connect failed
	ExitTLS         = 4  // TLS handshake or certificate verification failed
	ExitDenied401   = 5  // upgrade answered 401: no usable token
	ExitDenied403   = 6  // upgrade answered 403: token valid but not allowed
	ExitUnavailable = 7  // upgrade answered 503: fail closed, retryable
	ExitClosed      = 8  // connection closed after the upgrade (close frame or lost)
	ExitEchoTimeout = 9  // no echo came back through the relay within --timeout
	ExitRejected    = 10 // upgrade failed otherwise (400, 404, 405, 502, no answer)
	// ExitPeersWithoutSession: sessions --every-peer found an agent
	// WireKubePeer with no live session through the gateway.
	ExitPeersWithoutSession = 11
	// The forward proxy of --proxy or the environment (docs/tools.md).
	ExitProxyUnreachable = 12 // the proxy's name, TCP port or CONNECT answer failed
	ExitProxyAuth        = 13 // CONNECT answered 407 or 401
	ExitProxyRefused     = 14 // CONNECT answered 403 (port not allowed) or another status but 200, 401, 407
	ExitProxyTLS         = 15 // through the proxy, a certificate not from the expected CA
	// ExitIdleClosed: --idle: the path closed the session while it was
	// held idle the way an agent holds it.
	ExitIdleClosed = 16
)

// ExitError carries the exit code a failed probe maps to. The message is
// safe to print: it never holds the token.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode returns the exit code for an error returned by Command: 0 for nil,
// the code of an *ExitError, ExitInternal for anything else.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitInternal
}

func usageErrorf(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// exitClass names each code in the report ("class" in JSON).
func exitClass(code int) string {
	switch code {
	case ExitOK:
		return "ok"
	case ExitUsage:
		return "usage"
	case ExitNetwork:
		return "network"
	case ExitTLS:
		return "tls"
	case ExitDenied401:
		return "unauthorized"
	case ExitDenied403:
		return "forbidden"
	case ExitUnavailable:
		return "unavailable"
	case ExitClosed:
		return "closed"
	case ExitEchoTimeout:
		return "echo_timeout"
	case ExitRejected:
		return "rejected"
	case ExitPeersWithoutSession:
		return "peers_without_session"
	case ExitProxyUnreachable:
		return "proxy_unreachable"
	case ExitProxyAuth:
		return "proxy_auth_required"
	case ExitProxyRefused:
		return "proxy_connect_refused"
	case ExitProxyTLS:
		return "proxy_intercepts_tls"
	case ExitIdleClosed:
		return "idle_closed"
	default:
		return "internal"
	}
}
