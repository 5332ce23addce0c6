package extauthz

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// config is the parsed, validated form of Options.
type config struct {
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
}

func (o *Options) complete() (*config, error) {
	if err := o.checkScalars(); err != nil {
		return nil, err
	}
	c := &config{
		audience:         o.Audience,
		agentSAs:         map[nsName]bool{},
		peerNamespace:    o.PeerNamespace,
		peerPrefix:       o.PeerServiceAccountPrefix,
		relayPath:        o.RelayPath,
		allowedOrigins:   map[string]bool{},
		allowSAs:         map[nsName]bool{},
		cacheSize:        o.CacheSize,
		cacheTTL:         o.CacheTTL,
		negativeCacheTTL: o.NegativeCacheTTL,
		maxInflight:      o.MaxInflightReviews,
		checkTimeout:     o.CheckTimeout,
	}
	namespaces := map[string]bool{o.PeerNamespace: true}
	for _, v := range o.AgentServiceAccounts {
		n, err := parseNSName("agent-service-account", v)
		if err != nil {
			return nil, err
		}
		c.agentSAs[n] = true
		namespaces[n.ns] = true
	}
	for _, v := range o.AllowServiceAccounts {
		n, err := parseNSName("allow-service-account", v)
		if err != nil {
			return nil, err
		}
		c.allowSAs[n] = true
		namespaces[n.ns] = true
	}
	for _, v := range o.AllowedOrigins {
		if err := checkOrigin(v); err != nil {
			return nil, err
		}
		c.allowedOrigins[strings.ToLower(strings.TrimSuffix(v, "/"))] = true
	}
	for _, v := range o.AuthnOnlyPaths {
		if err := checkPath("authn-only-path", v); err != nil {
			return nil, err
		}
		if underPrefix(o.RelayPath, v) {
			return nil, fmt.Errorf("--authn-only-path: %q covers --relay-path %q", v, o.RelayPath)
		}
		c.authnOnlyPaths = append(c.authnOnlyPaths, v)
	}
	if len(c.authnOnlyPaths) > 0 && len(c.allowSAs) == 0 {
		return nil, fmt.Errorf("--allow-service-account: required with --authn-only-path: %w", errNoIdentity)
	}
	for ns := range namespaces {
		c.watchedNamespaces = append(c.watchedNamespaces, ns)
	}
	return c, nil
}

// checkScalars validates the single-valued options.
func (o *Options) checkScalars() error {
	for _, a := range []struct {
		flag, v    string
		allowEmpty bool
	}{{"grpc-listen", o.GRPCListen, false}, {"http-listen", o.HTTPListen, true}, {"metrics-listen", o.MetricsListen, false}} {
		if err := checkAddr(a.flag, a.v, a.allowEmpty); err != nil {
			return err
		}
	}
	switch {
	case o.Audience == "" || strings.ContainsAny(o.Audience, " ,\t"):
		return fmt.Errorf("--audience: want one non-empty audience, got %q", o.Audience)
	case len(validation.IsDNS1123Label(o.PeerNamespace)) > 0:
		return fmt.Errorf("--peer-namespace: not a namespace name: %q", o.PeerNamespace)
	case o.PeerServiceAccountPrefix == "" || len(validation.IsDNS1123Subdomain(o.PeerServiceAccountPrefix+"x")) > 0:
		return fmt.Errorf("--peer-service-account-prefix: not a ServiceAccount name prefix: %q", o.PeerServiceAccountPrefix)
	case checkPath("relay-path", o.RelayPath) != nil || o.RelayPath == "/":
		return fmt.Errorf("--relay-path: want a clean absolute path other than /, got %q", o.RelayPath)
	case o.CacheSize < 1:
		return fmt.Errorf("--cache-size: want >= 1, got %d", o.CacheSize)
	case o.CacheTTL < 0:
		return fmt.Errorf("--cache-ttl: want >= 0, got %s", o.CacheTTL)
	case o.NegativeCacheTTL < 0:
		return fmt.Errorf("--negative-cache-ttl: want >= 0, got %s", o.NegativeCacheTTL)
	case o.MaxInflightReviews < 1:
		return fmt.Errorf("--max-inflight-reviews: want >= 1, got %d", o.MaxInflightReviews)
	case o.CheckTimeout <= 0:
		return fmt.Errorf("--check-timeout: want > 0, got %s", o.CheckTimeout)
	case o.KubeAPIQPS <= 0:
		return fmt.Errorf("--kube-api-qps: want > 0, got %v", o.KubeAPIQPS)
	case o.KubeAPIBurst < 1:
		return fmt.Errorf("--kube-api-burst: want >= 1, got %d", o.KubeAPIBurst)
	case o.LogFormat != "json" && o.LogFormat != "text":
		return fmt.Errorf("--log-format: want json or text, got %q", o.LogFormat)
	}
	return nil
}
