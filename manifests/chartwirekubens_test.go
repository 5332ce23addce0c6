package manifests

import (
	"slices"
	"testing"
)

// TestChartWireKubeNamespace: wirekube.namespace alone moves every value
// that names WireKube's namespace (the agent ServiceAccount, the peer
// ServiceAccounts' namespace, the raw relay's Service, the relay lock-down
// policy and extauthz's Roles), and each of those set explicitly still wins.
func TestChartWireKubeNamespace(t *testing.T) {
	one := renderChart(t, "--set", "wirekube.namespace=wk,networkPolicy.mode=enforce")
	x := parseExtauthz(t, container(one.deployment(t), "extauthz").Args)
	mustf(t, slices.Equal(x.AgentServiceAccounts, []string{"wk/wirekube-agent"}), "--agent-service-account %v", x.AgentServiceAccounts)
	mustf(t, x.PeerNamespace == "wk", "--peer-namespace %q", x.PeerNamespace)
	b := parseBridge(t, container(one.deployment(t), "bridge").Args)
	mustf(t, b.RelayAddr == "wirekube-relay-control.wk.svc.cluster.local:3478", "--relay-addr %q", b.RelayAddr)
	relayPolicy := one.one(t, "NetworkPolicy", "wirekube-relay-gateway-relay-ports")
	mustf(t, relayPolicy.GetNamespace() == "wk", "relay lock-down policy in %q", relayPolicy.GetNamespace())
	mustf(t, roleNamespaces(one)["wk"] && !roleNamespaces(one)["wirekube-system"], "extauthz Roles in %v", roleNamespaces(one))

	set := renderChart(t, "--set", "wirekube.namespace=wk,networkPolicy.mode=enforce,extauthz.agentServiceAccounts={agents/agent},"+
		"extauthz.peerNamespace=peers,bridge.relayAddr=relay.relays.svc:3478,networkPolicy.relayNamespace=relays")
	x = parseExtauthz(t, container(set.deployment(t), "extauthz").Args)
	mustf(t, slices.Equal(x.AgentServiceAccounts, []string{"agents/agent"}), "explicit agentServiceAccounts: %v", x.AgentServiceAccounts)
	mustf(t, x.PeerNamespace == "peers", "explicit peerNamespace: %q", x.PeerNamespace)
	b = parseBridge(t, container(set.deployment(t), "bridge").Args)
	mustf(t, b.RelayAddr == "relay.relays.svc:3478", "explicit relayAddr: %q", b.RelayAddr)
	relayPolicy = set.one(t, "NetworkPolicy", "wirekube-relay-gateway-relay-ports")
	mustf(t, relayPolicy.GetNamespace() == "relays", "explicit relayNamespace: policy in %q", relayPolicy.GetNamespace())
}

// roleNamespaces returns the namespaces holding one of the chart's Roles.
func roleNamespaces(r *rendered) map[string]bool {
	out := map[string]bool{}
	for _, u := range r.all("Role") {
		out[u.GetNamespace()] = true
	}
	return out
}
