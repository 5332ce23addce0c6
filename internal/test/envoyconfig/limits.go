package envoyconfig

import (
	"fmt"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	localrlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// Envoy's defaults when a connection manager leaves the field unset
// (envoyproxy.io FAQ "How do I configure timeouts?": the default idle timeout
// is 1 hour; http_connection_manager.proto max_request_headers_kb: 60 KiB
// when unset, answered 431).
const (
	DefaultIdleTimeout       = time.Hour
	DefaultMaxRequestHeaders = 60 << 10
)

// DownstreamLimits are the limits the named listener's HTTP connection
// manager puts on client connections.
type DownstreamLimits struct {
	// IdleTimeout closes a connection with no active request or stream
	// (common_http_protocol_options.idle_timeout); 0 is an explicit 0s,
	// which disables it.
	IdleTimeout time.Duration
	// MaxRequestHeaderBytes is max_request_headers_kb in bytes.
	MaxRequestHeaderBytes int
}

// ListenerLimits returns the downstream limits of the named listener, with
// Envoy's defaults for fields the config leaves unset.
func ListenerLimits(b *bootstrapv3.Bootstrap, listener string) (DownstreamLimits, error) {
	hcm, err := listenerHCM(b, listener)
	if err != nil {
		return DownstreamLimits{}, err
	}
	lim := DownstreamLimits{IdleTimeout: DefaultIdleTimeout, MaxRequestHeaderBytes: DefaultMaxRequestHeaders}
	if d := hcm.GetCommonHttpProtocolOptions().GetIdleTimeout(); d != nil {
		lim.IdleTimeout = d.AsDuration()
	}
	if kb := hcm.GetMaxRequestHeadersKb(); kb != nil {
		lim.MaxRequestHeaderBytes = int(kb.GetValue()) << 10
	}
	return lim, nil
}

// listenerHCM returns the first HTTP connection manager of the named
// listener's filter chains.
func listenerHCM(b *bootstrapv3.Bootstrap, listener string) (*hcmv3.HttpConnectionManager, error) {
	for _, l := range b.GetStaticResources().GetListeners() {
		if l.GetName() != listener {
			continue
		}
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				hcm := &hcmv3.HttpConnectionManager{}
				if f.GetTypedConfig().UnmarshalTo(hcm) == nil {
					return hcm, nil
				}
			}
		}
		return nil, fmt.Errorf("envoy: listener %s has no HTTP connection manager", listener)
	}
	return nil, fmt.Errorf("envoy: no listener %s", listener)
}

// SourceLimit is the per-client-address bucket of the relay route (Envoy's
// HTTP local rate limit with a blank-valued remote_address descriptor: one
// bucket per distinct address).
type SourceLimit struct {
	// Enabled is filter_enabled's default: Envoy's local rate limit filter
	// returns at once for a request it is not enabled for (counting
	// nothing, taking no token). Only 0 % and 100 % are read.
	Enabled bool
	// Burst is the bucket's max_tokens: upgrades one address may make at once.
	Burst uint32
	// PerFill tokens are added every FillInterval.
	PerFill      uint32
	FillInterval time.Duration
	// Buckets is max_dynamic_descriptors: addresses tracked at once (LRU).
	Buckets uint32
}

// RelaySourceLimit returns the per-source limit of the named listener's route
// named "relay", or an error when the route has none.
func RelaySourceLimit(b *bootstrapv3.Bootstrap, listener string) (SourceLimit, error) {
	hcm, err := listenerHCM(b, listener)
	if err != nil {
		return SourceLimit{}, err
	}
	for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			a, ok := r.GetTypedPerFilterConfig()["envoy.filters.http.local_ratelimit"]
			if r.GetName() != "relay" || !ok {
				continue
			}
			l := &localrlv3.LocalRateLimit{}
			if err := a.UnmarshalTo(l); err != nil {
				return SourceLimit{}, fmt.Errorf("envoy: relay route local rate limit: %w", err)
			}
			return sourceLimit(l)
		}
	}
	return SourceLimit{}, fmt.Errorf("envoy: listener %s: no relay route with a local rate limit", listener)
}

func sourceLimit(l *localrlv3.LocalRateLimit) (SourceLimit, error) {
	for _, d := range l.GetDescriptors() {
		e := d.GetEntries()
		if len(e) != 1 || e[0].GetKey() != "remote_address" || e[0].GetValue() != "" {
			continue
		}
		tb := d.GetTokenBucket()
		enabled, err := fullOrNothing(l.GetFilterEnabled().GetDefaultValue())
		if err != nil {
			return SourceLimit{}, err
		}
		lim := SourceLimit{Enabled: enabled, Burst: tb.GetMaxTokens(), PerFill: 1, FillInterval: tb.GetFillInterval().AsDuration(), Buckets: 20}
		if tb.GetTokensPerFill() != nil { // token_bucket.proto: 1 when unset
			lim.PerFill = tb.GetTokensPerFill().GetValue()
		}
		if m := l.GetMaxDynamicDescriptors(); m != nil { // local_rate_limit.proto: 20 when unset
			lim.Buckets = m.GetValue()
		}
		return lim, nil
	}
	return SourceLimit{}, fmt.Errorf("envoy: relay route local rate limit has no blank-valued remote_address descriptor")
}

// fullOrNothing reads a filter_enabled default: true at 100 %, false at 0 %
// or when unset (local_rate_limit.proto: "If not set, this defaults to 0%").
// A fraction in between (Envoy samples requests) is an error: nothing here
// models it.
func fullOrNothing(p *typev3.FractionalPercent) (bool, error) {
	if p == nil || p.GetNumerator() == 0 {
		return false, nil
	}
	if p.GetDenominator() == typev3.FractionalPercent_HUNDRED && p.GetNumerator() == 100 {
		return true, nil
	}
	return false, fmt.Errorf("envoy: relay route local rate limit enabled for %v: want 0 or 100 %%", p)
}
