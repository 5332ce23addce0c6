package bridge

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/wirekube/relay-ws/bridge/internal/revocationclient"
	"github.com/wirekube/relay-ws/internal/cli"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/logging"
	"github.com/wirekube/relay-ws/internal/netutil"
)

// DefaultRelayAddr is the headless Service the WireKube Helm chart always
// renders while its relay is enabled (wirekube-relay-control, clusterIP
// None: one DNS answer per ready relay Pod). The chart's external
// wirekube-relay Service is not rendered once the mesh uses wss, so the
// bridge must not depend on it.
const DefaultRelayAddr = "wirekube-relay-control.wirekube-system.svc.cluster.local:3478"

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
	// UnreadyAt is the percent of MaxSessions from which the bridge reports
	// itself full (wirekube_bridge_full, a log line); it clears one percent
	// of MaxSessions lower. It never fails /readyz (fullready.go); the flag
	// keeps its name so existing manifests still parse. Default 0: off.
	UnreadyAt int
	// DrainTimeout bounds the drain on shutdown; sessions are closed with
	// 1001 spread over it. Default 30s.
	DrainTimeout time.Duration
	// DrainPeers is a DNS name resolving to the ready replicas of this
	// bridge (a headless Service). With it the drain keeps every session
	// open while no other replica is ready, and closes them once one is
	// (handover.go). Empty (the default): the closes are spread over the
	// first half of DrainTimeout whatever else is running.
	DrainPeers string
	// DrainRate is how many sessions a drain closes per second, so the
	// agents it moves arrive no faster than the other replicas can admit
	// them (their TokenReview rate: every moved agent costs one there).
	// Default 0: the closes are spread over the first half of DrainTimeout.
	// Danger: sessions still open when DrainTimeout ends are cut at once;
	// keep DrainTimeout above sessions / DrainRate.
	DrainRate float64
	// LogFormat is json or text. Default json.
	LogFormat string
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
	// RevocationOptions: the revocation stream and token expiry
	// (internal/revocationclient).
	RevocationOptions
	// RecoveryOptions: the relay hold, the per-peer limits and the
	// key-mismatch backoff.
	RecoveryOptions
	// SignatureOptions: the check of extauthz's signature on the identity
	// headers (internal/identitycheck).
	SignatureOptions
	// KeysReloadOptions: the periodic re-read of the keys file the
	// signature check trusts (internal/identitycheck).
	KeysReloadOptions
	// ReexportOptions: other containers' metrics on ReexportPath
	// (bridge/internal/reexport).
	ReexportOptions
	// BounceOptions: who bounces new sessions past the full mark (bounce.go).
	BounceOptions

	// DialRelay dials the raw relay. Nil uses a net.Dialer. Tests and
	// embedders may replace it.
	DialRelay func(ctx context.Context, network, addr string) (net.Conn, error)
	// ResolveRelay resolves the host of RelayAddr to addresses. Nil uses
	// net.DefaultResolver.LookupHost. Tests and embedders may replace it.
	ResolveRelay func(ctx context.Context, host string) ([]string, error)
	// ResolvePeers resolves DrainPeers. Nil uses
	// net.DefaultResolver.LookupHost.
	ResolvePeers func(ctx context.Context, host string) ([]string, error)
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

		RevocationOptions: revocationclient.DefaultOptions(),
		RecoveryOptions: RecoveryOptions{
			RelayWait:              7500 * time.Millisecond,
			RelayWaitMax:           1000,
			MaxSessionsPerPeer:     2,
			MaxUnregisteredPerPeer: 1,
			KeyMismatchBackoffMax:  60 * time.Second,
		},
		SignatureOptions:  DefaultSignatureOptions(),
		KeysReloadOptions: KeysReloadOptions{IdentityKeysReloadInterval: 10 * time.Second},
		BounceOptions:     BounceOptions{FullBounce: BounceByBridge},
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
	fs.IntVar(&o.UnreadyAt, "unready-at", o.UnreadyAt, "percent of --max-sessions from which the bridge reports itself full (metric wirekube_bridge_full, a log line); it clears 1 % lower; /readyz is not affected (full is healthy); 0: off")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", o.DrainTimeout, "time to close open sessions on shutdown")
	fs.StringVar(&o.DrainPeers, "drain-peers", o.DrainPeers, "DNS name of the ready replicas (headless Service); with it a drain keeps sessions open until another replica is ready; empty: spread the closes over half of --drain-timeout")
	fs.Float64Var(&o.DrainRate, "drain-rate", o.DrainRate, "sessions a drain closes per second (0: spread over half of --drain-timeout)")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, logging.FormatUsage)
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, logging.LevelUsage)
	o.RevocationOptions.AddFlags(fs)
	o.RecoveryOptions.AddFlags(fs)
	o.SignatureOptions.AddFlags(fs)
	o.KeysReloadOptions.AddFlags(fs)
	o.ReexportOptions.AddFlags(fs)
	o.BounceOptions.AddFlags(fs)
}

// Validate reports every invalid setting, each error naming its flag.
func (o *Options) Validate() error {
	errs := append(o.addressErrors(), o.boundErrors()...)
	errs = append(errs, o.RecoveryOptions.Validate(), o.RevocationOptions.Validate(), o.SignatureOptions.Validate(),
		o.KeysReloadOptions.Validate(), o.ReexportOptions.Validate(), o.BounceOptions.Validate())
	if err := logging.CheckFormat(o.LogFormat); err != nil {
		errs = append(errs, err)
	}
	if _, err := logging.ParseLevel(o.LogLevel); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// addressErrors checks the listeners, the relay and drain-peer names, the
// relay path and the allowed origins.
func (o *Options) addressErrors() []error {
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
	if o.DrainPeers != "" {
		if _, _, err := net.SplitHostPort(o.DrainPeers); err == nil || strings.ContainsAny(o.DrainPeers, "/: ") {
			errs = append(errs, fmt.Errorf("--drain-peers: want a DNS name without port or scheme, got %q", o.DrainPeers))
		}
	}
	if !strings.HasPrefix(o.Path, "/") || o.Path == "/healthz" || o.Path == "/readyz" || o.Path == "/metrics" {
		errs = append(errs, fmt.Errorf("--path: want an absolute path other than /healthz, /readyz, /metrics, got %q", o.Path))
	}
	for _, origin := range o.AllowedOrigins {
		if u, err := url.Parse(origin); err != nil || u.Scheme == "" || u.Host == "" {
			errs = append(errs, fmt.Errorf("--allowed-origins: want scheme://host[:port], got %q", origin))
		}
	}
	return errs
}

// boundErrors checks the timeouts, the drain rate and the session cap
// with its full mark.
func (o *Options) boundErrors() []error {
	var errs []error
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
	if o.DrainRate < 0 || math.IsNaN(o.DrainRate) || math.IsInf(o.DrainRate, 0) {
		errs = append(errs, fmt.Errorf("--drain-rate: want a finite rate >= 0, got %v", o.DrainRate))
	}
	if o.MaxSessions < 1 {
		errs = append(errs, fmt.Errorf("--max-sessions: must be at least 1, got %d", o.MaxSessions))
	}
	if o.UnreadyAt < 0 || o.UnreadyAt > 100 {
		errs = append(errs, fmt.Errorf("--unready-at: want a percent of --max-sessions from 0 (off) to 100, got %d", o.UnreadyAt))
	}
	return errs
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

// RevocationOptions are the flags of the revocation stream and of the
// token-expiry close (internal/revocationclient/options.go).
type RevocationOptions = revocationclient.Options

// Default location of the revocation stream (internal/revocationclient).
const (
	DefaultRevocationAddr       = revocationclient.DefaultAddr
	DefaultRevocationSecretFile = revocationclient.DefaultSecretFile
)
