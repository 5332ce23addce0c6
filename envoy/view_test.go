package envoy

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	headermutationv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
)

// view is a decoded config with the typed messages the property checks read.
// The pointers alias the decoded messages, so a test can break one field and
// show that its check fails.
type view struct {
	boot      *bootstrapv3.Bootstrap
	relay     *listenerv3.Listener
	tls       *tlsv3.DownstreamTlsContext // nil on a plaintext listener
	hcm       *hcmv3.HttpConnectionManager
	filters   []string // http filter names, in order
	mutation  *headermutationv3.HeaderMutation
	authz     *extauthzv3.ExtAuthz
	accessLog []*streamv3.StdoutAccessLog
	routes    []*routev3.Route
	// authzOff is the per-route ExtAuthzPerRoute of each route name, if any.
	authzOff  map[string]*extauthzv3.ExtAuthzPerRoute
	clusters  map[string]*clusterv3.Cluster
	listeners map[string]*listenerv3.Listener
	metrics   *hcmv3.HttpConnectionManager
}

func loadView(t *testing.T, name string) *view {
	t.Helper()
	b, err := envoyconfig.Load(name)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	v, err := newView(b)
	if err != nil {
		t.Fatalf("view of %s: %v", name, err)
	}
	return v
}

func newView(b *bootstrapv3.Bootstrap) (*view, error) {
	v := &view{boot: b, authzOff: map[string]*extauthzv3.ExtAuthzPerRoute{},
		clusters: map[string]*clusterv3.Cluster{}, listeners: map[string]*listenerv3.Listener{}}
	for _, c := range b.GetStaticResources().GetClusters() {
		v.clusters[c.GetName()] = c
	}
	for _, l := range b.GetStaticResources().GetListeners() {
		v.listeners[l.GetName()] = l
		if strings.HasPrefix(l.GetName(), "relay_") {
			if v.relay != nil {
				return nil, fmt.Errorf("two relay listeners: %s and %s", v.relay.GetName(), l.GetName())
			}
			v.relay = l
		}
	}
	if v.relay == nil {
		return nil, fmt.Errorf("no listener named relay_*")
	}
	if err := v.decodeRelay(); err != nil {
		return nil, err
	}
	if m := v.listeners["envoy_metrics"]; m != nil {
		v.metrics = &hcmv3.HttpConnectionManager{}
		if err := onlyHCM(m, v.metrics); err != nil {
			return nil, fmt.Errorf("envoy_metrics: %w", err)
		}
	}
	return v, nil
}

func (v *view) decodeRelay() error {
	if len(v.relay.GetFilterChains()) != 1 {
		return fmt.Errorf("relay listener: %d filter chains, want 1", len(v.relay.GetFilterChains()))
	}
	if ts := v.relay.GetFilterChains()[0].GetTransportSocket(); ts != nil {
		v.tls = &tlsv3.DownstreamTlsContext{}
		if err := ts.GetTypedConfig().UnmarshalTo(v.tls); err != nil {
			return fmt.Errorf("tls: %w", err)
		}
	}
	v.hcm = &hcmv3.HttpConnectionManager{}
	if err := onlyHCM(v.relay, v.hcm); err != nil {
		return err
	}
	for _, f := range v.hcm.GetHttpFilters() {
		v.filters = append(v.filters, f.GetName())
		if err := v.decodeFilter(f.GetTypedConfig()); err != nil {
			return fmt.Errorf("filter %s: %w", f.GetName(), err)
		}
	}
	for _, al := range v.hcm.GetAccessLog() {
		s := &streamv3.StdoutAccessLog{}
		if err := al.GetTypedConfig().UnmarshalTo(s); err != nil {
			return fmt.Errorf("access log %s: %w", al.GetName(), err)
		}
		v.accessLog = append(v.accessLog, s)
	}
	for _, vh := range v.hcm.GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			v.routes = append(v.routes, r)
			if a, ok := r.GetTypedPerFilterConfig()["envoy.filters.http.ext_authz"]; ok {
				pr := &extauthzv3.ExtAuthzPerRoute{}
				if err := a.UnmarshalTo(pr); err != nil {
					return fmt.Errorf("route %s: %w", r.GetName(), err)
				}
				v.authzOff[r.GetName()] = pr
			}
		}
	}
	return nil
}

func (v *view) decodeFilter(a *anypb.Any) error {
	switch {
	case a.MessageIs(&headermutationv3.HeaderMutation{}):
		v.mutation = &headermutationv3.HeaderMutation{}
		return a.UnmarshalTo(v.mutation)
	case a.MessageIs(&extauthzv3.ExtAuthz{}):
		v.authz = &extauthzv3.ExtAuthz{}
		return a.UnmarshalTo(v.authz)
	}
	return nil
}

func onlyHCM(l *listenerv3.Listener, hcm *hcmv3.HttpConnectionManager) error {
	fs := l.GetFilterChains()[0].GetFilters()
	if len(fs) != 1 || fs[0].GetName() != "envoy.filters.network.http_connection_manager" {
		return fmt.Errorf("listener %s: want exactly one http_connection_manager filter", l.GetName())
	}
	return fs[0].GetTypedConfig().UnmarshalTo(hcm)
}

// route returns the route with the given name, or nil.
func (v *view) route(name string) *routev3.Route {
	for _, r := range v.routes {
		if r.GetName() == name {
			return r
		}
	}
	return nil
}

// authzDisabled reports whether ext_authz is switched off on route r.
func (v *view) authzDisabled(r *routev3.Route) bool {
	pr := v.authzOff[r.GetName()]
	return pr != nil && pr.GetDisabled()
}

// removes reports whether the header mutation filter strips the request
// header name (as Envoy sees it: lower case).
func (v *view) removes(name string) bool {
	name = strings.ToLower(name)
	for _, m := range v.mutation.GetMutations().GetRequestMutations() {
		if m.GetRemove() == name {
			return true
		}
		km := m.GetRemoveOnMatch().GetKeyMatcher()
		if km != nil && km.GetPrefix() != "" && strings.HasPrefix(name, strings.ToLower(km.GetPrefix())) &&
			(km.GetIgnoreCase() || km.GetPrefix() == strings.ToLower(km.GetPrefix())) {
			return true
		}
	}
	return false
}

// endpoint returns the single endpoint address of cluster name.
func (v *view) endpoint(name string) (netip.AddrPort, error) {
	c := v.clusters[name]
	if c == nil {
		return netip.AddrPort{}, fmt.Errorf("no cluster %q", name)
	}
	var addrs []*corev3.SocketAddress
	for _, e := range c.GetLoadAssignment().GetEndpoints() {
		for _, lb := range e.GetLbEndpoints() {
			addrs = append(addrs, lb.GetEndpoint().GetAddress().GetSocketAddress())
		}
	}
	if len(addrs) != 1 {
		return netip.AddrPort{}, fmt.Errorf("cluster %q: %d endpoints, want 1", name, len(addrs))
	}
	return socketAddr(addrs[0])
}

func socketAddr(sa *corev3.SocketAddress) (netip.AddrPort, error) {
	ip, err := netip.ParseAddr(sa.GetAddress())
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: %w", sa.GetAddress(), err)
	}
	return netip.AddrPortFrom(ip, uint16(sa.GetPortValue())), nil
}

// http2 reports whether cluster c speaks HTTP/2 to its upstream.
func http2(c *clusterv3.Cluster) bool {
	a := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	if a == nil {
		return false
	}
	o := &upstreamhttpv3.HttpProtocolOptions{}
	if err := a.UnmarshalTo(o); err != nil {
		return false
	}
	return o.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}

// formatText returns an access log format as one string, for substring checks.
func formatText(s *streamv3.StdoutAccessLog) string {
	f := s.GetLogFormat()
	if j := f.GetJsonFormat(); j != nil {
		b, _ := protojson.Marshal(j)
		return string(b)
	}
	return f.GetTextFormatSource().GetInlineString()
}

// clone deep-copies a view by re-decoding its bootstrap, so a test can break
// one copy without touching the others.
func (v *view) clone(t *testing.T) *view {
	t.Helper()
	c, err := newView(proto.Clone(v.boot).(*bootstrapv3.Bootstrap))
	if err != nil {
		t.Fatalf("clone: %v", err)
	}
	return c
}
