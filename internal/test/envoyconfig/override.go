package envoyconfig

import (
	"fmt"
	"net"
	"strconv"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// Overrides changes the addresses and certificate paths of a shipped config so
// that it can run beside other processes (the e2e suite picks free ports). The
// zero value changes nothing. Addresses are host:port with a literal IP.
type Overrides struct {
	// Admin is the admin interface address.
	Admin string
	// Listeners maps a listener name (relay_tls, relay_plaintext,
	// envoy_metrics) to its address.
	Listeners map[string]string
	// Clusters maps a cluster name (extauthz, bridge, envoy_admin) to the
	// address of its single endpoint.
	Clusters map[string]string
	// CertFile and KeyFile replace the TLS listener's certificate. A listener
	// that reads it through file-based SDS gets the two files inline instead,
	// so the overridden config needs no SDS file. Set both or neither.
	CertFile, KeyFile string
}

// Apply rewrites b in place. A name in Listeners or Clusters that b does not
// have is an error, so a renamed listener cannot silently keep its old port.
func (o Overrides) Apply(b *bootstrapv3.Bootstrap) error {
	if (o.CertFile == "") != (o.KeyFile == "") {
		return fmt.Errorf("envoy: set both CertFile and KeyFile, or neither")
	}
	if o.Admin != "" {
		if err := setAddress(b.GetAdmin().GetAddress(), o.Admin); err != nil {
			return fmt.Errorf("envoy: admin: %w", err)
		}
	}
	if err := o.applyListeners(b); err != nil {
		return err
	}
	return o.applyClusters(b)
}

func (o Overrides) applyListeners(b *bootstrapv3.Bootstrap) error {
	seen := map[string]bool{}
	for _, l := range b.GetStaticResources().GetListeners() {
		if addr, ok := o.Listeners[l.GetName()]; ok {
			if err := setAddress(l.GetAddress(), addr); err != nil {
				return fmt.Errorf("envoy: listener %s: %w", l.GetName(), err)
			}
			seen[l.GetName()] = true
		}
		if o.CertFile == "" && o.KeyFile == "" {
			continue
		}
		for _, fc := range l.GetFilterChains() {
			if err := o.applyCert(fc.GetTransportSocket()); err != nil {
				return fmt.Errorf("envoy: listener %s: %w", l.GetName(), err)
			}
		}
	}
	for name := range o.Listeners {
		if !seen[name] {
			return fmt.Errorf("envoy: no listener named %q", name)
		}
	}
	return nil
}

func (o Overrides) applyCert(ts *corev3.TransportSocket) error {
	if ts == nil {
		return nil
	}
	tc := &tlsv3.DownstreamTlsContext{}
	if err := ts.GetTypedConfig().UnmarshalTo(tc); err != nil {
		return fmt.Errorf("tls context: %w", err)
	}
	ctx := tc.GetCommonTlsContext()
	ctx.TlsCertificateSdsSecretConfigs = nil
	ctx.TlsCertificates = []*tlsv3.TlsCertificate{{
		CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: o.CertFile}},
		PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: o.KeyFile}},
	}}
	a, err := anypb.New(tc)
	if err != nil {
		return fmt.Errorf("tls context: %w", err)
	}
	ts.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: a}
	return nil
}

func (o Overrides) applyClusters(b *bootstrapv3.Bootstrap) error {
	seen := map[string]bool{}
	for _, c := range b.GetStaticResources().GetClusters() {
		addr, ok := o.Clusters[c.GetName()]
		if !ok {
			continue
		}
		n := 0
		for _, e := range c.GetLoadAssignment().GetEndpoints() {
			for _, lb := range e.GetLbEndpoints() {
				if err := setAddress(lb.GetEndpoint().GetAddress(), addr); err != nil {
					return fmt.Errorf("envoy: cluster %s: %w", c.GetName(), err)
				}
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("envoy: cluster %s has %d endpoints, want 1", c.GetName(), n)
		}
		seen[c.GetName()] = true
	}
	for name := range o.Clusters {
		if !seen[name] {
			return fmt.Errorf("envoy: no cluster named %q", name)
		}
	}
	return nil
}

func setAddress(a *corev3.Address, hostport string) error {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("address %q: %w", hostport, err)
	}
	if net.ParseIP(host) == nil {
		return fmt.Errorf("address %q: host must be a literal IP", hostport)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("address %q: port: %w", hostport, err)
	}
	sa := a.GetSocketAddress()
	if sa == nil {
		return fmt.Errorf("address %q: config has no socket address to replace", hostport)
	}
	sa.Address = host
	sa.PortSpecifier = &corev3.SocketAddress_PortValue{PortValue: uint32(p)}
	return nil
}
