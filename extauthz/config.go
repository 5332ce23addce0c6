package extauthz

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wirekube/relay-ws/internal/logging"
	"github.com/wirekube/relay-ws/internal/netutil"
)

// Config is the validated, parsed form of Options, built once by
// Options.Complete and shared read-only by Run, NewInformers and
// NewAuthorizer. The zero value is not usable.
type Config struct {
	grpcListen        string
	httpListen        string
	metricsListen     string
	audience          string
	agentSAs          map[nsName]bool
	peerNamespace     string
	peerPrefix        string
	relayPath         string
	allowedOrigins    map[string]bool
	authnOnlyPaths    []string
	allowSAs          map[nsName]bool
	cacheSize         int
	cacheTTL          time.Duration
	negativeCacheTTL  time.Duration
	maxInflight       int
	checkTimeout      time.Duration
	watchedNamespaces []string
	peerEvents        bool
	// Local verification, degraded mode and review gate (verify.go,
	// offline.go, fairness.go).
	issuers        []string
	jwksInterval   time.Duration
	jwksMinRefresh time.Duration
	onUnavailable  string
	offlineWindow  time.Duration
	maxReviewWait  time.Duration
	reviewQPS      float64
	reviewBurst    int
	// The revocation Watch listener (watch_options.go).
	watch WatchOptions
	// The identity header signature (signing.go).
	signing SigningOptions
}

// Complete validates o (the same errors as Validate) and returns the parsed
// Config.
func (o *Options) Complete() (*Config, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c := &Config{
		grpcListen:       o.GRPCListen,
		httpListen:       o.HTTPListen,
		metricsListen:    o.MetricsListen,
		audience:         o.Audience,
		agentSAs:         map[nsName]bool{},
		peerNamespace:    o.PeerNamespace,
		peerPrefix:       o.PeerServiceAccountPrefix,
		relayPath:        o.RelayPath,
		allowedOrigins:   map[string]bool{},
		authnOnlyPaths:   append([]string(nil), o.AuthnOnlyPaths...),
		allowSAs:         map[nsName]bool{},
		cacheSize:        o.CacheSize,
		cacheTTL:         o.CacheTTL,
		negativeCacheTTL: o.NegativeCacheTTL,
		maxInflight:      o.MaxInflightReviews,
		checkTimeout:     o.CheckTimeout,
		peerEvents:       o.PeerEvents,
		issuers:          append([]string(nil), o.ServiceAccountIssuers...),
		jwksInterval:     o.JWKSRefreshInterval,
		jwksMinRefresh:   o.JWKSMinRefreshInterval,
		onUnavailable:    o.OnReviewUnavailable,
		offlineWindow:    o.OfflineWindow,
		maxReviewWait:    o.MaxReviewWait,
		reviewQPS:        o.KubeAPIQPS,
		reviewBurst:      o.KubeAPIBurst,
		watch:            o.WatchOptions,
		signing:          o.SigningOptions,
	}
	namespaces := map[string]bool{o.PeerNamespace: true}
	for _, v := range o.AgentServiceAccounts {
		n, _ := parseNSName("agent-service-account", v) // checked by Validate
		c.agentSAs[n] = true
		namespaces[n.ns] = true
	}
	for _, v := range o.AllowServiceAccounts {
		n, _ := parseNSName("allow-service-account", v) // checked by Validate
		c.allowSAs[n] = true
		namespaces[n.ns] = true
	}
	for _, v := range o.AllowedOrigins {
		c.allowedOrigins[strings.ToLower(strings.TrimSuffix(v, "/"))] = true
	}
	for ns := range namespaces {
		c.watchedNamespaces = append(c.watchedNamespaces, ns)
	}
	return c, nil
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
	check(o.KubeAPIQPS <= 0, "--kube-api-qps: want > 0, got %v", o.KubeAPIQPS)
	check(o.KubeAPIBurst < 1, "--kube-api-burst: want >= 1, got %d", o.KubeAPIBurst)
	for _, err := range []error{logging.CheckFormat(o.LogFormat), levelErr(o.LogLevel), o.VerifyOptions.Validate(), o.WatchOptions.Validate(),
		o.SigningOptions.Validate()} {
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
