package extauthz

import (
	"net/netip"
	"strings"
	"time"

	"github.com/wirekube/relay-ws/extauthz/internal/admission"
	"github.com/wirekube/relay-ws/extauthz/internal/binding"
	"github.com/wirekube/relay-ws/extauthz/internal/meshwatch"
	"github.com/wirekube/relay-ws/internal/clientaddr"
)

// Config is the validated, parsed form of Options, built once by
// Options.Complete and shared read-only by Run, NewInformers and
// NewAuthorizer. The zero value is not usable.
type Config struct {
	grpcListen    string
	httpListen    string
	metricsListen string
	audience      string
	// The identities the binding rules admit (internal/binding).
	identities        binding.Config
	relayPath         string
	allowedOrigins    map[string]bool
	authnOnlyPaths    []string
	cacheSize         int
	cacheTTL          time.Duration
	negativeCacheTTL  time.Duration
	maxInflight       int
	checkTimeout      time.Duration
	trustedHops       int
	trustedProxies    []netip.Prefix
	watchedNamespaces []string
	peerEvents        bool
	// Local verification, degraded mode and review gate (internal/tokenverify,
	// internal/standin, internal/reviewgate).
	issuers        []string
	jwksInterval   time.Duration
	jwksMinRefresh time.Duration
	onUnavailable  string
	offlineWindow  time.Duration
	maxReviewWait  time.Duration
	onThrottled    string
	afterPending   int
	reviewQPS      float64
	reviewBurst    int
	// The revocation Watch listener (internal/revocationhub/options.go).
	revocation RevocationOptions
	// The admission policy reported on (internal/admission).
	peerAdmission admission.Config
	// The WireKubeMesh watch (meshwatch_options.go).
	meshWatch meshwatch.Config
	// The identity header signature (signing.go).
	signing SigningOptions
	// Failed checks per client address (failurelimit.go).
	failureLimit FailureLimitOptions
	// The bridge's room (internal/steering); empty: not read.
	bridgeRoomURL string
}

// Complete validates o (the same errors as Validate) and returns the parsed
// Config.
func (o *Options) Complete() (*Config, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	proxies, _ := clientaddr.ParsePrefixes(o.TrustedProxies) // validated above
	c := &Config{
		grpcListen:    o.GRPCListen,
		httpListen:    o.HTTPListen,
		metricsListen: o.MetricsListen,
		audience:      o.Audience,
		identities: binding.Config{Agents: map[binding.ServiceAccount]bool{},
			PeerNamespace: o.PeerNamespace, PeerPrefix: o.PeerServiceAccountPrefix,
			Allowed: map[binding.ServiceAccount]bool{}},
		relayPath:        o.RelayPath,
		allowedOrigins:   map[string]bool{},
		authnOnlyPaths:   append([]string(nil), o.AuthnOnlyPaths...),
		cacheSize:        o.CacheSize,
		cacheTTL:         o.CacheTTL,
		negativeCacheTTL: o.NegativeCacheTTL,
		maxInflight:      o.MaxInflightReviews,
		checkTimeout:     o.CheckTimeout,
		trustedHops:      o.TrustedHops,
		trustedProxies:   proxies,
		peerEvents:       o.PeerEvents,
		issuers:          append([]string(nil), o.ServiceAccountIssuers...),
		jwksInterval:     o.JWKSRefreshInterval,
		jwksMinRefresh:   o.JWKSMinRefreshInterval,
		onUnavailable:    o.OnReviewUnavailable,
		offlineWindow:    o.OfflineWindow,
		maxReviewWait:    o.MaxReviewWait,
		onThrottled:      o.OnReviewThrottled,
		afterPending:     o.ReviewAfterMaxPending,
		reviewQPS:        o.KubeAPIQPS,
		reviewBurst:      o.KubeAPIBurst,
		revocation:       o.RevocationOptions,
		peerAdmission:    o.PeerAdmissionOptions.Complete(),
		meshWatch:        o.MeshWatchOptions.Complete(),
		signing:          o.SigningOptions,
		failureLimit:     o.FailureLimitOptions,
		bridgeRoomURL:    o.BridgeRoomURL,
	}
	namespaces := map[string]bool{o.PeerNamespace: true}
	for _, v := range o.AgentServiceAccounts {
		n, _ := parseNSName("agent-service-account", v) // checked by Validate
		c.identities.Agents[n] = true
		namespaces[n.Namespace] = true
	}
	for _, v := range o.AllowServiceAccounts {
		n, _ := parseNSName("allow-service-account", v) // checked by Validate
		c.identities.Allowed[n] = true
		namespaces[n.Namespace] = true
	}
	for _, v := range o.AllowedOrigins {
		c.allowedOrigins[strings.ToLower(strings.TrimSuffix(v, "/"))] = true
	}
	for ns := range namespaces {
		c.watchedNamespaces = append(c.watchedNamespaces, ns)
	}
	return c, nil
}
