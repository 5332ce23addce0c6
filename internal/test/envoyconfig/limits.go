package envoyconfig

import (
	"fmt"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
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
