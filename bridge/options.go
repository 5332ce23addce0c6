package bridge

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/wirekube/relay-ws/internal/cli"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/logging"
	"github.com/wirekube/relay-ws/internal/netutil"
)

// Options are the bridge settings, filled by flags (AddFlags) or by an
// embedding program. DefaultOptions returns the documented defaults;
// Validate reports every bad setting and Complete turns them into the Config
// that New takes.
type Options struct {
	// Listen is the main listener (host:port or unix:/path). It serves
	// Path, /healthz and /readyz. Default 127.0.0.1:8081.
	Listen string
	// MetricsListen serves /healthz, /readyz and /metrics. Empty disables
	// it. Default :9102.
	MetricsListen string
	// DebugSessions adds the session listing (GET /debug/sessions) to the
	// metrics listener. Default false: the listener has no authentication
	// and the listing names every connected peer, its identity and key
	// fingerprint (docs/bridge.md#who-is-connected).
	DebugSessions bool
	// RelayAddr is the raw TCP relay (host:port). A name resolving to
	// several addresses (a headless Service) is dialled in the order
	// documented on relayDialer (relaydial.go). Default DefaultRelayAddr,
	// the WireKube chart's headless wirekube-relay-control Service.
	RelayAddr string
	// RelayDialTimeout bounds the connection attempt to one relay address;
	// the next address is tried after it. Default 1s.
	RelayDialTimeout time.Duration
	// Path is the WebSocket endpoint. Default /relay.
	Path string
	// RegisterTimeout bounds the time from the upgrade to a verified
	// Register frame. Default 10s.
	RegisterTimeout time.Duration
	// AllowedOrigins lists the Origin header values accepted. Empty (the
	// default) refuses every request carrying an Origin header: the agent
	// never sends one, a browser always does.
	AllowedOrigins []string
	// PingInterval is the WebSocket ping period; a client silent for 3 to 3.25
	// intervals is closed. Default 20s.
	PingInterval time.Duration
	// WriteTimeout bounds every write to the client and to the relay, so a
	// stuck peer closes only its own session. Default 10s.
	WriteTimeout time.Duration
	// MaxSessions caps concurrent sessions; beyond it upgrades get 503
	// at_capacity. Default 20000.
	MaxSessions int
	// DrainTimeout bounds the drain on shutdown; sessions are closed with
	// 1001 spread over it. Default 30s.
	DrainTimeout time.Duration
	// LogFormat is json or text. Default json.
	LogFormat string
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
	// RevocationOptions: the revocation stream and token expiry.
	RevocationOptions
	// RecoveryOptions: the relay hold, the per-peer limits and the
	// key-mismatch backoff.
	RecoveryOptions
	// SignatureOptions: the check of extauthz's signature on the identity
	// headers (signature.go).
	SignatureOptions

	// DialRelay dials the raw relay. Nil uses a net.Dialer. Tests and
	// embedders may replace it.
	DialRelay func(ctx context.Context, network, addr string) (net.Conn, error)
	// ResolveRelay resolves the host of RelayAddr to addresses. Nil uses
	// net.DefaultResolver.LookupHost. Tests and embedders may replace it.
	ResolveRelay func(ctx context.Context, host string) ([]string, error)
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		Listen:           "127.0.0.1:8081",
		MetricsListen:    ":9102",
		RelayAddr:        DefaultRelayAddr,
		RelayDialTimeout: time.Second,
		Path:             contract.DefaultRelayPath,
		RegisterTimeout:  10 * time.Second,
		PingInterval:     20 * time.Second,
		WriteTimeout:     10 * time.Second,
		MaxSessions:      20000,
		DrainTimeout:     30 * time.Second,
		LogFormat:        logging.DefaultFormat,
		LogLevel:         logging.DefaultLevel,

		RevocationOptions: RevocationOptions{
			RevocationAddr:         DefaultRevocationAddr,
			RevocationSecretFile:   DefaultRevocationSecretFile,
			RevocationUnreadyAfter: 10 * time.Second,
			RevocationStaleTimeout: 60 * time.Second,
		},
		RecoveryOptions: RecoveryOptions{
			RelayWait:              7500 * time.Millisecond,
			RelayWaitMax:           1000,
			MaxSessionsPerPeer:     2,
			MaxUnregisteredPerPeer: 1,
			KeyMismatchBackoffMax:  60 * time.Second,
		},
		SignatureOptions: DefaultSignatureOptions(),
	}
}

// AddFlags registers one flag per field on fs, with o's current values as
// defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", o.Listen, "main listener, host:port or unix:/path (serves the relay path, /healthz, /readyz)")
	fs.StringVar(&o.MetricsListen, "metrics-listen", o.MetricsListen, "listener for /healthz, /readyz and /metrics; empty disables it")
	fs.BoolVar(&o.DebugSessions, "debug-sessions", o.DebugSessions, "serve the live sessions (peer, identity, key fingerprint, counters) on /debug/sessions of --metrics-listen, which has no authentication")
	fs.StringVar(&o.RelayAddr, "relay-addr", o.RelayAddr, "raw TCP relay address, host:port; a name with several addresses (headless Service) is dialled in rotation, failing over")
	fs.DurationVar(&o.RelayDialTimeout, "relay-dial-timeout", o.RelayDialTimeout, "time allowed to connect to one relay address before the next is tried")
	fs.StringVar(&o.Path, "path", o.Path, "path of the WebSocket endpoint")
	fs.DurationVar(&o.RegisterTimeout, "register-timeout", o.RegisterTimeout, "time allowed from the upgrade to a verified Register frame")
	fs.Var(cli.NewStringList(&o.AllowedOrigins), "allowed-origins", "Origin values accepted, comma-separated or repeated (default empty: any Origin header is refused)")
	fs.DurationVar(&o.PingInterval, "ping-interval", o.PingInterval, "WebSocket ping period; a client silent for 3 to 3.25 periods is closed")
	fs.DurationVar(&o.WriteTimeout, "write-timeout", o.WriteTimeout, "deadline of every write to the client or the relay")
	fs.IntVar(&o.MaxSessions, "max-sessions", o.MaxSessions, "maximum concurrent sessions (503 at_capacity beyond)")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", o.DrainTimeout, "time to close open sessions on shutdown")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, logging.FormatUsage)
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, logging.LevelUsage)
	o.RevocationOptions.AddFlags(fs)
	o.RecoveryOptions.AddFlags(fs)
	o.SignatureOptions.AddFlags(fs)
}

// Validate reports every invalid setting, each error naming its flag.
func (o *Options) Validate() error {
	var errs []error
	for _, a := range []struct {
		flag, v    string
		allowEmpty bool
	}{{"listen", o.Listen, false}, {"metrics-listen", o.MetricsListen, true}} {
		if err := netutil.CheckFlag(a.flag, a.v, a.allowEmpty); err != nil {
			errs = append(errs, err)
		}
	}
	if o.DebugSessions && o.MetricsListen == "" {
		errs = append(errs, errors.New("--debug-sessions: needs --metrics-listen, which serves it"))
	}
	if _, _, err := net.SplitHostPort(o.RelayAddr); err != nil {
		errs = append(errs, fmt.Errorf("--relay-addr: want host:port: %w", err))
	}
	if !strings.HasPrefix(o.Path, "/") || o.Path == "/healthz" || o.Path == "/readyz" || o.Path == "/metrics" {
		errs = append(errs, fmt.Errorf("--path: want an absolute path other than /healthz, /readyz, /metrics, got %q", o.Path))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"register-timeout", o.RegisterTimeout}, {"ping-interval", o.PingInterval},
		{"write-timeout", o.WriteTimeout}, {"drain-timeout", o.DrainTimeout},
		{"relay-dial-timeout", o.RelayDialTimeout},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("--%s: must be positive, got %s", d.flag, d.v))
		}
	}
	if o.MaxSessions < 1 {
		errs = append(errs, fmt.Errorf("--max-sessions: must be at least 1, got %d", o.MaxSessions))
	}
	errs = append(errs, o.RecoveryOptions.Validate())
	for _, origin := range o.AllowedOrigins {
		if u, err := url.Parse(origin); err != nil || u.Scheme == "" || u.Host == "" {
			errs = append(errs, fmt.Errorf("--allowed-origins: want scheme://host[:port], got %q", origin))
		}
	}
	errs = append(errs, o.RevocationOptions.Validate(), o.SignatureOptions.Validate())
	if err := logging.CheckFormat(o.LogFormat); err != nil {
		errs = append(errs, err)
	}
	if _, err := logging.ParseLevel(o.LogLevel); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Config is the validated, completed form of Options, built once by
// Complete; New takes it. Read-only after Complete.
type Config struct {
	Options
	origins map[string]bool
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Complete validates o (the same errors as Validate) and fills in the
// derived fields.
func (o Options) Complete() (*Config, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c := &Config{Options: o, origins: make(map[string]bool, len(o.AllowedOrigins))}
	for _, origin := range o.AllowedOrigins {
		c.origins[origin] = true
	}
	c.dial = o.DialRelay
	if c.dial == nil {
		d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
		c.dial = d.DialContext
	}
	return c, nil
}

// RevocationOptions are the settings of the revocation stream to extauthz
// (docs/revocation.md) and of the token-expiry close.
type RevocationOptions struct {
	// RevocationAddr is extauthz's --revocation-listen (unix:/path or a
	// loopback host:port) for the revocation Watch stream
	// (docs/revocation.md). Default DefaultRevocationAddr, a Unix socket in
	// the directory the Pod's two containers share. Empty turns revocation
	// off (and with it the readiness gate on the stream): live sessions then
	// end on token expiry only, whatever happens to their Pod, Node,
	// ServiceAccount or WireKubePeer. Dangerous; for tests and embedders.
	RevocationAddr string
	// RevocationSecretFile holds the secret extauthz writes at every start;
	// the bridge reads it at every (re)connect and sends it with the Watch
	// call. Default DefaultRevocationSecretFile. Required with
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

// AddFlags registers one flag per field on fs, with o's current values as
// defaults.
func (o *RevocationOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.RevocationAddr, "revocation-addr", o.RevocationAddr, "extauthz's --revocation-listen, the revocation stream (unix:/path or a loopback host:port); empty turns revocation of live sessions off")
	fs.StringVar(&o.RevocationSecretFile, "revocation-secret-file", o.RevocationSecretFile, "file holding the secret extauthz writes for the revocation stream (read at every connect)")
	fs.DurationVar(&o.RevocationUnreadyAfter, "revocation-unready-after", o.RevocationUnreadyAfter, "fail /readyz and refuse upgrades (503 revocation_unavailable) once the revocation stream has been out of sync this long (at most --revocation-stale-timeout)")
	fs.DurationVar(&o.RevocationStaleTimeout, "revocation-stale-timeout", o.RevocationStaleTimeout, "close live sessions (1008 revocation_stale) after the revocation stream was out of sync this long")
	fs.DurationVar(&o.TokenExpiryGrace, "token-expiry-grace", o.TokenExpiryGrace, "keep a session open this long past its token's expiry (1008 token_expired)")
}

// Validate reports every invalid setting, each error naming its flag.
func (o *RevocationOptions) Validate() error {
	var errs []error
	if err := netutil.CheckFlag("revocation-addr", o.RevocationAddr, true); err != nil {
		errs = append(errs, err)
	} else if o.RevocationAddr != "" && !loopbackOrUnix(o.RevocationAddr) {
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

// RecoveryOptions are the settings of the relay hold, the per-peer limits
// and the key-mismatch backoff.
type RecoveryOptions struct {
	// RelayWait is how long an upgrade is held, unanswered, while the relay
	// is unreachable, before 503 relay_unavailable; 0 answers at once. Keep
	// it under the agent's 10 s handshake timeout. Default 7.5s, chosen
	// from the agent's backoff (docs/bridge.md#relay-wait): a 3, 15 or 40 s
	// outage then ends inside a held dial.
	RelayWait time.Duration
	// RelayWaitMax bounds the upgrades held at once; beyond it 503
	// relay_wait_full. Default 1000.
	RelayWaitMax int
	// MaxSessionsPerPeer caps one WireKubePeer's concurrent sessions
	// (held, upgrading or open); beyond it 429 peer_session_limit. Default 2:
	// the live session and its replacement during a reconnect.
	MaxSessionsPerPeer int
	// MaxUnregisteredPerPeer caps one peer's sessions that have not
	// verified their Register yet; beyond it 429 peer_unregistered_limit.
	// Default 1.
	MaxUnregisteredPerPeer int
	// KeyMismatchBackoffMax caps the window in which an identity whose
	// Register carried another key is refused 403 register_key_mismatch
	// before the upgrade (1 s, doubling per repeat). Default 60s.
	KeyMismatchBackoffMax time.Duration
}

// AddFlags registers one flag per field on fs, with o's current values as
// defaults.
func (o *RecoveryOptions) AddFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.RelayWait, "relay-wait", o.RelayWait, "hold an upgrade this long while the relay is unreachable before 503 relay_unavailable (0: answer at once; keep under the agent's 10s handshake timeout)")
	fs.IntVar(&o.RelayWaitMax, "relay-wait-max", o.RelayWaitMax, "maximum upgrades held waiting for the relay (503 relay_wait_full beyond)")
	fs.IntVar(&o.MaxSessionsPerPeer, "max-sessions-per-peer", o.MaxSessionsPerPeer, "maximum concurrent sessions of one WireKubePeer (429 peer_session_limit beyond)")
	fs.IntVar(&o.MaxUnregisteredPerPeer, "max-unregistered-per-peer", o.MaxUnregisteredPerPeer, "maximum sessions of one WireKubePeer not yet registered (429 peer_unregistered_limit beyond)")
	fs.DurationVar(&o.KeyMismatchBackoffMax, "key-mismatch-backoff-max", o.KeyMismatchBackoffMax, "cap of the window (1s doubling) in which an identity that registered a wrong key gets 403 register_key_mismatch before the upgrade")
}

// Validate reports every invalid setting, each error naming its flag.
func (o *RecoveryOptions) Validate() error {
	var errs []error
	if o.RelayWait < 0 || o.RelayWait >= 10*time.Second {
		errs = append(errs, fmt.Errorf("--relay-wait: want 0 to under the agent's 10s handshake timeout, got %s", o.RelayWait))
	}
	if o.RelayWaitMax < 1 {
		errs = append(errs, fmt.Errorf("--relay-wait-max: must be at least 1, got %d", o.RelayWaitMax))
	}
	if o.MaxSessionsPerPeer < 1 {
		errs = append(errs, fmt.Errorf("--max-sessions-per-peer: must be at least 1, got %d", o.MaxSessionsPerPeer))
	}
	if o.MaxUnregisteredPerPeer < 1 || o.MaxUnregisteredPerPeer > o.MaxSessionsPerPeer {
		errs = append(errs, fmt.Errorf("--max-unregistered-per-peer: want 1 to --max-sessions-per-peer (%d), got %d",
			o.MaxSessionsPerPeer, o.MaxUnregisteredPerPeer))
	}
	if o.KeyMismatchBackoffMax < time.Second {
		errs = append(errs, fmt.Errorf("--key-mismatch-backoff-max: must be at least 1s, got %s", o.KeyMismatchBackoffMax))
	}
	return errors.Join(errs...)
}
