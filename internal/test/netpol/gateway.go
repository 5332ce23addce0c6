package netpol

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// The cluster the gateway's flow table is evaluated in: WireKube installed
// by its Helm chart in wirekube-system (labels and ports as the chart
// fixtures in manifests/testdata/wirekube-chart, which a test keeps equal
// to these), this gateway beside it, a Prometheus, other
// workloads, nodes on 10.0.0.0/24 (node-a runs relay-pod-a, node-b
// relay-pod-b, node-c no relay) and the internet.
var (
	relayPorts = []corev1.ContainerPort{
		{Name: "control", ContainerPort: 3478, Protocol: corev1.ProtocolTCP},
		{Name: "udp", ContainerPort: 3478, Protocol: corev1.ProtocolUDP},
		{Name: "cluster", ContainerPort: 3479, Protocol: corev1.ProtocolTCP},
	}
	// chartLabels are the WireKube chart's labels (v0.0.17); component is
	// set on relay objects only.
	chartLabels = func(name, component string) map[string]string {
		l := map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "wirekube",
			"app.kubernetes.io/instance": "wirekube", "app.kubernetes.io/managed-by": "Helm",
			"app.kubernetes.io/version": "v0.0.17"}
		if component != "" {
			l["app.kubernetes.io/component"] = component
		}
		return l
	}

	RelayPod = Endpoint{Name: "relay-pod-a", Namespace: "wirekube-system", IP: netip.MustParseAddr("10.244.1.10"),
		Node: "node-a", Labels: chartLabels("wirekube-relay", "relay"), Ports: relayPorts}
	RelayPod2 = Endpoint{Name: "relay-pod-b", Namespace: "wirekube-system", IP: netip.MustParseAddr("10.244.2.10"),
		Node: "node-b", Labels: chartLabels("wirekube-relay", "relay"), Ports: relayPorts}
	// AgentOnRelayNode is the agent of relay-pod-a's node: NetworkPolicy
	// never restricts traffic between a Pod and its own node.
	AgentOnRelayNode = Endpoint{Name: "agent-on-relay-node", Namespace: "wirekube-system", HostNetwork: true,
		IP: netip.MustParseAddr("10.0.0.1"), Node: "node-a", Labels: chartLabels("wirekube-agent", "")}
	GatewayPod = Endpoint{Name: "our-gateway-pod", Namespace: "wirekube-system", IP: netip.MustParseAddr("10.244.1.20"), Node: "node-a",
		Labels: map[string]string{"app.kubernetes.io/name": "wirekube-relay-gateway",
			"app.kubernetes.io/component": "gateway", "app.kubernetes.io/part-of": "wirekube"}}
	ChartGatewayPod = Endpoint{Name: "chart-gateway-pod", Namespace: "wirekube-system", IP: netip.MustParseAddr("10.244.1.30"),
		Labels: chartLabels("wirekube-relay-ws", "relay")}
	AgentHostNetwork = Endpoint{Name: "agent-hostnetwork", Namespace: "wirekube-system", HostNetwork: true,
		IP: netip.MustParseAddr("10.0.0.5"), Node: "node-c", Labels: chartLabels("wirekube-agent", "")}
	AgentOnPodNetwork = Endpoint{Name: "agent-labelled-pod", Namespace: "wirekube-system", IP: netip.MustParseAddr("10.244.1.40"),
		Labels: chartLabels("wirekube-agent", "")}
	OtherPod = Endpoint{Name: "pod-in-default", Namespace: "default", IP: netip.MustParseAddr("10.244.3.10"),
		Labels: map[string]string{"app": "anything"}}
	ProxyPod = Endpoint{Name: "ingress-proxy-pod", Namespace: "ingress-nginx", IP: netip.MustParseAddr("10.244.3.20"),
		NamespaceLabels: map[string]string{"wirekube.io/relay-proxy": "true"},
		Labels:          map[string]string{"app.kubernetes.io/name": "ingress-nginx"}}
	PrometheusPod = Endpoint{Name: "prometheus-pod", Namespace: "monitoring", IP: netip.MustParseAddr("10.244.4.10"),
		Labels: map[string]string{"app.kubernetes.io/name": "prometheus"}}
	Internet = Endpoint{Name: "internet-client", IP: netip.MustParseAddr("203.0.113.7")}
)

// Case is one flow and whether the rendered policies must allow it.
type Case struct {
	Flow  Flow
	Allow bool
	Why   string
}

// Shape selects which of our policies a rendering holds.
type Shape struct {
	// WithoutEnvoy: the gateway Pods serve the bridge and extauthz on the
	// Pod address behind a policy (components/without-envoy, front none).
	WithoutEnvoy bool
	// RelayOpen: no policy of ours selects the relay Pods (the chart's
	// networkPolicy.mode off, manifests/base without
	// components/relay-lockdown): every flow to them stays as WireKube's
	// chart leaves it, agents on transport tcp included.
	RelayOpen bool
}

func tcpFlow(from, to Endpoint, port int32) Flow {
	return Flow{From: from, To: to, Protocol: corev1.ProtocolTCP, Port: port}
}

// GatewayFlows is the table of flows the gateway's NetworkPolicies must hold
// in shape s.
func GatewayFlows(s Shape) []Case {
	cases := []Case{
		{tcpFlow(GatewayPod, RelayPod, 3478), true, "the bridge dials the raw control port"},
		{tcpFlow(GatewayPod, RelayPod2, 3478), true, "any relay replica behind the headless Service"},
		{tcpFlow(ChartGatewayPod, RelayPod, 3478), false, "the chart's own gateway is replaced by ours (docs/alongside-chart.md)"},
		{tcpFlow(AgentOnPodNetwork, RelayPod, 3478), false, "a Pod, even one labelled as the agent, must go through the gateway"},
		{tcpFlow(OtherPod, RelayPod, 3478), false, "no workload reaches the unauthenticated control port"},
		{tcpFlow(Internet, RelayPod, 3478), false, "nor the internet (a LoadBalancer keeping client addresses)"},
		{tcpFlow(AgentHostNetwork, RelayPod, 3478), false, "an agent still on transport tcp on another node is cut (no address rule can admit it safely)"},
		{tcpFlow(AgentOnRelayNode, RelayPod, 3478), true, "the relay Pod's own node: no NetworkPolicy restricts it, lock-down or not"},
		{tcpFlow(AgentOnRelayNode, RelayPod2, 3478), false, "the same agent to a relay Pod on another node is cut like any other"},
		{tcpFlow(RelayPod, RelayPod2, 3479), true, "relay-to-relay cluster traffic"},
		{tcpFlow(RelayPod2, RelayPod, 3479), true, "relay-to-relay cluster traffic, other way"},
		{tcpFlow(GatewayPod, RelayPod, 3479), false, "the cluster port is for relays only"},
		{tcpFlow(OtherPod, RelayPod, 3479), false, "the cluster port is for relays only"},
		{tcpFlow(AgentHostNetwork, RelayPod, 3479), false, "the cluster port is for relays only"},
		{Flow{From: Internet, To: RelayPod, Protocol: corev1.ProtocolUDP, Port: 3478}, true, "NAT probes, external WireGuard peers"},
		{Flow{From: AgentHostNetwork, To: RelayPod, Protocol: corev1.ProtocolUDP, Port: 3478}, true, "NAT probes from agents"},
		{tcpFlow(PrometheusPod, RelayPod, 9090), true, "scraping the relay keeps working (any port but 3478/3479)"},
		{tcpFlow(PrometheusPod, RelayPod, 8080), true, "other relay ports are not this policy's business"},
		{tcpFlow(PrometheusPod, GatewayPod, 9102), true, "bridge metrics"},
		{tcpFlow(PrometheusPod, GatewayPod, 9103), true, "extauthz metrics"},
	}
	if s.RelayOpen {
		for i := range cases {
			if cases[i].Flow.To.Name == RelayPod.Name || cases[i].Flow.To.Name == RelayPod2.Name {
				cases[i].Allow, cases[i].Why = true, "no lock-down yet: "+cases[i].Why+" (open until the lock-down stage)"
			}
		}
	}
	if s.WithoutEnvoy {
		return append(cases,
			Case{tcpFlow(ProxyPod, GatewayPod, 8081), true, "the proxy that runs ext_authz reaches the bridge"},
			Case{tcpFlow(ProxyPod, GatewayPod, 9001), true, "the proxy calls extauthz (gRPC)"},
			Case{tcpFlow(ProxyPod, GatewayPod, 9002), true, "the proxy calls extauthz (HTTP)"},
			Case{tcpFlow(OtherPod, GatewayPod, 8081), false, "the bridge trusts identity headers: only the proxy may reach it"},
			Case{tcpFlow(Internet, GatewayPod, 8081), false, "the bridge trusts identity headers: only the proxy may reach it"},
			Case{tcpFlow(AgentHostNetwork, GatewayPod, 8081), false, "agents go through the proxy"},
		)
	}
	return append(cases,
		Case{tcpFlow(Internet, GatewayPod, 8443), true, "agents reach Envoy (TLS, ext_authz)"},
		Case{tcpFlow(PrometheusPod, GatewayPod, 9902), true, "Envoy metrics"},
	)
}

// Violations evaluates every case against policies and describes each one
// that does not hold.
func Violations(policies []networkingv1.NetworkPolicy, cases []Case) []string {
	var out []string
	for _, c := range cases {
		got, err := Allowed(policies, c.Flow)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("%s: %v", c.Flow, err))
		case got != c.Allow:
			out = append(out, fmt.Sprintf("%s: allowed=%v, want %v (%s)", c.Flow, got, c.Allow, c.Why))
		}
	}
	return out
}
