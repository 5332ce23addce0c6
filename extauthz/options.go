package extauthz

import (
	"errors"
	"flag"
	"fmt"
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wirekube/relay-ws/extauthz/internal/admission"
	"github.com/wirekube/relay-ws/extauthz/internal/binding"
	"github.com/wirekube/relay-ws/extauthz/internal/failurelimit"
	"github.com/wirekube/relay-ws/extauthz/internal/meshwatch"
	"github.com/wirekube/relay-ws/extauthz/internal/roomwatch"
	"github.com/wirekube/relay-ws/extauthz/internal/signkeys"
	"github.com/wirekube/relay-ws/internal/cli"
	"github.com/wirekube/relay-ws/internal/clientaddr"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/logging"
	"github.com/wirekube/relay-ws/internal/netutil"
)

// Options is the user-facing configuration, one field per flag. The zero
// value is not usable: start from DefaultOptions. Validate reports every bad
// field, each error naming its flag; Complete turns the options into the
// parsed Config that NewInformers, NewAuthorizer and Run take.
type Options struct {
	// GRPCListen serves envoy.service.auth.v3.Authorization and
	// grpc.health.v1.Health. Default 127.0.0.1:9001.
	GRPCListen string
	// HTTPListen serves the plain HTTP external-auth mode; empty disables
	// it. Default 127.0.0.1:9002.
	HTTPListen string
	// MetricsListen serves /healthz, /readyz and /metrics. Default :9103.
	MetricsListen string
	// Kubeconfig is a kubeconfig path; empty means in-cluster, then the
	// KUBECONFIG / ~/.kube/config loading rules.
	Kubeconfig string
	// Audience is the only token audience accepted. Default wirekube-relay.
	Audience string
	// AgentServiceAccounts ("ns/name") are the agent identities whose tokens
	// must be bound to a Pod or a Node. Default wirekube-system/wirekube-agent.
	AgentServiceAccounts []string
	// PeerNamespace and PeerServiceAccountPrefix define the dedicated
	// per-peer ServiceAccounts: <prefix><peer> in PeerNamespace.
	PeerNamespace            string
	PeerServiceAccountPrefix string
	// RelayPath is the WebSocket endpoint that gets the full peer binding.
	RelayPath string
	// AllowedOrigins lists exact Origin values accepted; a request with any
	// other Origin header is denied. Default none (only requests without
	// Origin, as the agent sends them).
	AllowedOrigins []string
	// AuthnOnlyPaths are path prefixes that need only a valid token of an
	// AllowServiceAccounts identity ("ns/name"): no peer binding.
	AuthnOnlyPaths       []string
	AllowServiceAccounts []string
	// CacheSize bounds the TokenReview cache (entries). Default 16384.
	CacheSize int
	// CacheTTL caps how long an accepted TokenReview is reused (never past
	// the token's exp). Default 60s. Longer delays revocation by
	// kube-apiserver (identity rules still run on every check).
	CacheTTL time.Duration
	// NegativeCacheTTL is how long a rejected token stays rejected without
	// asking again. Default 5s.
	NegativeCacheTTL time.Duration
	// MaxInflightReviews bounds concurrent TokenReview calls. Default 16.
	MaxInflightReviews int
	// CheckTimeout bounds one check, including the wait for an in-flight
	// slot and the TokenReview call. Default 2s. Keep the proxy's ext_authz
	// timeout above it.
	CheckTimeout time.Duration
	// TrustedHops is how many proxies in front of the front (load
	// balancers that append to X-Forwarded-For) are believed when the
	// client address is read (internal/clientaddr.FromForwardedFor): 0,
	// the default, records the address the front itself saw (or set, the
	// nginx snippet's $remote_addr after its realip settings). An entry
	// further left is what a client may have written and is never
	// recorded. Setting it higher than the real number of appending hops
	// lets a client choose the recorded address (it decides nothing, but
	// the logs would lie). At most clientaddr.MaxTrustedHops.
	TrustedHops int
	// TrustedProxies lists the fronts (CIDR prefixes or addresses,
	// comma-separated) whose word on the client is believed: a check that
	// came on a connection from anywhere else records the client address
	// "unverified", whatever its X-Forwarded-For or Envoy source address
	// says, because whoever asked (the client itself, where extauthz's
	// port is reachable) chose them. A Unix socket is always trusted.
	// Default clientaddr.DefaultTrustedProxies, loopback: the fronts in the
	// Pod. Name a range only the proxy's connections come from; a Pod CIDR
	// any workload shares lets that workload choose the address.
	TrustedProxies string
	// KubeAPIQPS and KubeAPIBurst are the client-side rate limits.
	KubeAPIQPS   float64
	KubeAPIBurst int
	// PeerEvents records Kubernetes Events on the WireKubePeer when a live
	// session is revoked or an upgrade refused for a reason the operator
	// must fix (docs/extauthz.md#events). Default true. Without RBAC to
	// write Events the writes fail quietly (one log line, a metric);
	// checks are never affected.
	PeerEvents bool
	// LogFormat is json or text. Default json.
	LogFormat string
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string

	// VerifyOptions: local token verification, the degraded mode and the
	// review gate.
	VerifyOptions
	// RevocationOptions: the revocation Watch listener (internal/revocationhub).
	RevocationOptions
	// PeerAdmissionOptions: the admission policy reported on (internal/admission).
	PeerAdmissionOptions
	// FailureLimitOptions: failed checks per client address
	// (internal/failurelimit).
	FailureLimitOptions
	// MeshWatchOptions: the WireKubeMesh watch (internal/meshwatch).
	MeshWatchOptions
	// SigningOptions: the signature on the identity headers
	// (internal/signkeys, signing.go).
	SigningOptions
	// RoomWatchOptions: the bridge's room, read to steer new sessions
	// (extauthz/internal/roomwatch, internal/steering).
	RoomWatchOptions
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		GRPCListen:               "127.0.0.1:9001",
		HTTPListen:               "127.0.0.1:9002",
		MetricsListen:            ":9103",
		Audience:                 contract.DefaultAudience,
		AgentServiceAccounts:     []string{"wirekube-system/wirekube-agent"},
		PeerNamespace:            "wirekube-system",
		PeerServiceAccountPrefix: "wirekube-relay-peer-",
		RelayPath:                contract.DefaultRelayPath,
		CacheSize:                16384,
		CacheTTL:                 60 * time.Second,
		NegativeCacheTTL:         5 * time.Second,
		MaxInflightReviews:       16,
		CheckTimeout:             2 * time.Second,
		TrustedProxies:           clientaddr.DefaultTrustedProxies,
		KubeAPIQPS:               50,
		KubeAPIBurst:             100,
		PeerEvents:               true,
		LogFormat:                logging.DefaultFormat,
		LogLevel:                 logging.DefaultLevel,
		VerifyOptions: VerifyOptions{
			JWKSRefreshInterval:    5 * time.Minute,
			JWKSMinRefreshInterval: 10 * time.Second,
			OnReviewUnavailable:    UnavailableDeny,
			OfflineWindow:          5 * time.Minute,
			MaxReviewWait:          500 * time.Millisecond,
			OnReviewThrottled:      ThrottledDeny,
			ReviewAfterMaxPending:  3000,
		},
		RevocationOptions:    revocationhub.DefaultOptions(),
		PeerAdmissionOptions: admission.DefaultOptions(),
		FailureLimitOptions:  failurelimit.DefaultOptions(),
		MeshWatchOptions:     meshwatch.DefaultOptions(),
		SigningOptions:       signkeys.DefaultOptions(),
	}
}

// AddFlags registers one flag per field on fs, with o's values as defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.GRPCListen, "grpc-listen", o.GRPCListen, "gRPC ext_authz and health listen address (host:port or unix:/path)")
	fs.StringVar(&o.HTTPListen, "http-listen", o.HTTPListen, "HTTP external-auth listen address; empty disables")
	fs.StringVar(&o.MetricsListen, "metrics-listen", o.MetricsListen, "/healthz, /readyz and /metrics listen address")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig path (default in-cluster, then KUBECONFIG)")
	fs.StringVar(&o.Audience, "audience", o.Audience, "required token audience")
	fs.Var(cli.NewStringList(&o.AgentServiceAccounts), "agent-service-account", "agent ServiceAccount ns/name whose tokens must be Pod- or Node-bound (repeatable)")
	fs.StringVar(&o.PeerNamespace, "peer-namespace", o.PeerNamespace, "namespace of the dedicated per-peer ServiceAccounts")
	fs.StringVar(&o.PeerServiceAccountPrefix, "peer-service-account-prefix", o.PeerServiceAccountPrefix, "name prefix of the per-peer ServiceAccounts")
	fs.StringVar(&o.RelayPath, "relay-path", o.RelayPath, "path of the relay WebSocket endpoint")
	fs.Var(cli.NewStringList(&o.AllowedOrigins), "allowed-origins", "accepted Origin values, comma-separated or repeated (default none)")
	fs.Var(cli.NewStringList(&o.AuthnOnlyPaths), "authn-only-path", "path prefix that needs only an allowlisted ServiceAccount token (repeatable)")
	fs.Var(cli.NewStringList(&o.AllowServiceAccounts), "allow-service-account", "ServiceAccount ns/name allowed on --authn-only-path (repeatable)")
	fs.IntVar(&o.CacheSize, "cache-size", o.CacheSize, "TokenReview cache entries")
	fs.DurationVar(&o.CacheTTL, "cache-ttl", o.CacheTTL, "max reuse of an accepted TokenReview (never past token exp)")
	fs.DurationVar(&o.NegativeCacheTTL, "negative-cache-ttl", o.NegativeCacheTTL, "reuse of a rejected TokenReview")
	fs.IntVar(&o.MaxInflightReviews, "max-inflight-reviews", o.MaxInflightReviews, "max concurrent TokenReview calls")
	fs.DurationVar(&o.CheckTimeout, "check-timeout", o.CheckTimeout, "bound of one check, including waiting for a TokenReview slot")
	fs.StringVar(&o.TrustedProxies, "trusted-proxies", o.TrustedProxies, "fronts (CIDR prefixes or addresses, comma-separated) whose X-Forwarded-For or source address is believed; a check from anywhere else records the client address as unverified (default: loopback, the fronts in the Pod)")
	fs.IntVar(&o.TrustedHops, "trusted-hops", o.TrustedHops, "proxies in front of the front whose X-Forwarded-For entries are believed for the logged client address (0: the address the front saw)")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Kubernetes client QPS")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Kubernetes client burst")
	fs.BoolVar(&o.PeerEvents, "peer-events", o.PeerEvents, "record Kubernetes Events on the WireKubePeer for revocations and refusals an operator must act on")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, logging.FormatUsage)
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, logging.LevelUsage)
	o.VerifyOptions.AddFlags(fs)
	o.RevocationOptions.AddFlags(fs)
	o.PeerAdmissionOptions.AddFlags(fs)
	o.MeshWatchOptions.AddFlags(fs)
	o.SigningOptions.AddFlags(fs)
	o.FailureLimitOptions.AddFlags(fs)
	o.RoomWatchOptions.AddFlags(fs)
}

// Validate reports every invalid option (errors.Join), each error naming
// its flag.
func (o *Options) Validate() error {
	errs := o.checkScalars()
	for _, v := range o.AgentServiceAccounts {
		if _, err := parseNSName("agent-service-account", v); err != nil {
			errs = append(errs, err)
		}
	}
	for _, v := range o.AllowServiceAccounts {
		if _, err := parseNSName("allow-service-account", v); err != nil {
			errs = append(errs, err)
		}
	}
	for _, v := range o.AllowedOrigins {
		if err := checkOrigin(v); err != nil {
			errs = append(errs, err)
		}
	}
	for _, v := range o.AuthnOnlyPaths {
		if err := checkPath("authn-only-path", v); err != nil {
			errs = append(errs, err)
		} else if underPrefix(o.RelayPath, v) {
			errs = append(errs, fmt.Errorf("--authn-only-path: %q covers --relay-path %q", v, o.RelayPath))
		}
	}
	if len(o.AuthnOnlyPaths) > 0 && len(o.AllowServiceAccounts) == 0 {
		errs = append(errs, fmt.Errorf("--allow-service-account: required with --authn-only-path: %w", errNoIdentity))
	}
	return errors.Join(errs...)
}

// checkScalars validates the single-valued options, one error per bad flag.
func (o *Options) checkScalars() []error {
	var errs []error
	for _, a := range []struct {
		flag, v    string
		allowEmpty bool
	}{{"grpc-listen", o.GRPCListen, false}, {"http-listen", o.HTTPListen, true}, {"metrics-listen", o.MetricsListen, false}} {
		if err := netutil.CheckFlag(a.flag, a.v, a.allowEmpty); err != nil {
			errs = append(errs, err)
		}
	}
	check := func(bad bool, format string, args ...any) {
		if bad {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(o.Audience == "" || strings.ContainsAny(o.Audience, " ,\t"), "--audience: want one non-empty audience, got %q", o.Audience)
	check(len(validation.IsDNS1123Label(o.PeerNamespace)) > 0, "--peer-namespace: not a namespace name: %q", o.PeerNamespace)
	check(o.PeerServiceAccountPrefix == "" || len(validation.IsDNS1123Subdomain(o.PeerServiceAccountPrefix+"x")) > 0,
		"--peer-service-account-prefix: not a ServiceAccount name prefix: %q", o.PeerServiceAccountPrefix)
	check(checkPath("relay-path", o.RelayPath) != nil || o.RelayPath == "/",
		"--relay-path: want a clean absolute path other than /, got %q", o.RelayPath)
	check(o.CacheSize < 1, "--cache-size: want >= 1, got %d", o.CacheSize)
	check(o.CacheTTL < 0, "--cache-ttl: want >= 0, got %s", o.CacheTTL)
	check(o.NegativeCacheTTL < 0, "--negative-cache-ttl: want >= 0, got %s", o.NegativeCacheTTL)
	check(o.MaxInflightReviews < 1, "--max-inflight-reviews: want >= 1, got %d", o.MaxInflightReviews)
	check(o.CheckTimeout <= 0, "--check-timeout: want > 0, got %s", o.CheckTimeout)
	if _, err := clientaddr.ParsePrefixes(o.TrustedProxies); err != nil {
		errs = append(errs, fmt.Errorf("--trusted-proxies: %w", err))
	}
	check(o.TrustedHops < 0 || o.TrustedHops > clientaddr.MaxTrustedHops, "--trusted-hops: want 0 to %d, got %d", clientaddr.MaxTrustedHops, o.TrustedHops)
	check(o.KubeAPIQPS <= 0, "--kube-api-qps: want > 0, got %v", o.KubeAPIQPS)
	check(o.KubeAPIBurst < 1, "--kube-api-burst: want >= 1, got %d", o.KubeAPIBurst)
	for _, err := range []error{logging.CheckFormat(o.LogFormat), levelErr(o.LogLevel), o.VerifyOptions.Validate(), o.RevocationOptions.Validate(),
		o.PeerAdmissionOptions.Validate(), o.SigningOptions.Validate(), o.FailureLimitOptions.Validate(), o.MeshWatchOptions.Validate(),
		o.RoomWatchOptions.Validate()} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func levelErr(level string) error {
	_, err := logging.ParseLevel(level)
	return err
}

// parseNSName parses a "namespace/name" flag value.
func parseNSName(flagName, v string) (binding.ServiceAccount, error) {
	ns, name, ok := strings.Cut(v, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return binding.ServiceAccount{}, fmt.Errorf("--%s: want namespace/name, got %q", flagName, v)
	}
	return binding.ServiceAccount{Namespace: ns, Name: name}, nil
}

func checkOrigin(v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("--allowed-origins: want scheme://host[:port], got %q", v)
	}
	return nil
}

func checkPath(flagName, v string) error {
	if p, ok := cleanPath(v); !ok || p != v {
		return fmt.Errorf("--%s: want a clean absolute path, got %q", flagName, v)
	}
	return nil
}

var errNoIdentity = errors.New("no identity configured")

// MeshWatchOptions are the flags of the WireKubeMesh watch
// (--mesh-watch, --expected-relay-url).
type MeshWatchOptions = meshwatch.Options

// PeerAdmissionOptions are the flags of the admission policy report
// (--peer-admission-policy, --peer-admission-binding).
type PeerAdmissionOptions = admission.Options

// SigningOptions configure the signature on the identity headers
// (--identity-signing-key-file, --identity-accepted-keys-file,
// --identity-keys-file; internal/signkeys).
type SigningOptions = signkeys.Options

// FailureLimitOptions are the flags of the limit on failed checks per client
// address (--source-failure-burst, --source-failure-rate,
// --source-failure-addresses).
type FailureLimitOptions = failurelimit.Options

// RoomWatchOptions are the flag of the bridge's room (--bridge-room-url).
type RoomWatchOptions = roomwatch.Options

// RevocationOptions configure the revocation Watch listener
// (internal/revocationhub/options.go).
type RevocationOptions = revocationhub.Options
