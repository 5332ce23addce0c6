package netpol

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// policies parses a YAML stream of NetworkPolicies (--- separated).
func policies(t *testing.T, src string) []networkingv1.NetworkPolicy {
	t.Helper()
	var out []networkingv1.NetworkPolicy
	for doc := range strings.SplitSeq(src, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var p networkingv1.NetworkPolicy
		if err := yaml.UnmarshalStrict([]byte("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"+doc), &p); err != nil {
			t.Fatalf("policy %q: %v", doc, err)
		}
		out = append(out, p)
	}
	return out
}

func pod(name, ns string, ip string, lbl ...string) Endpoint {
	e := Endpoint{Name: name, Namespace: ns, IP: netip.MustParseAddr(ip), Labels: map[string]string{}}
	for i := 0; i+1 < len(lbl); i += 2 {
		e.Labels[lbl[i]] = lbl[i+1]
	}
	return e
}

var (
	web   = withPorts(pod("web", "prod", "10.244.0.10", "app", "web", "tier", "front"))
	api   = pod("api", "prod", "10.244.0.11", "app", "api")
	other = pod("other-ns-web", "dev", "10.244.1.10", "app", "web")
	mon   = withNSLabels(pod("prometheus", "monitoring", "10.244.2.10", "app", "prometheus"), "team", "obs")
	node  = Endpoint{Name: "node", IP: netip.MustParseAddr("10.0.0.5")}
	agent = Endpoint{Name: "hostnet-agent", Namespace: "prod", HostNetwork: true, IP: netip.MustParseAddr("10.0.0.5"),
		Labels: map[string]string{"app": "api"}}
	internet = Endpoint{Name: "internet", IP: netip.MustParseAddr("203.0.113.7")}

	// web on node n1: its node's address, a hostNetwork Pod there, a Pod on
	// the Pod network of the same node, and another node.
	webOnN1   = onNode(web, "n1")
	n1        = Endpoint{Name: "node-n1", IP: netip.MustParseAddr("10.0.0.1"), Node: "n1"}
	hostnetN1 = Endpoint{Name: "hostnet-on-n1", Namespace: "prod", HostNetwork: true, IP: netip.MustParseAddr("10.0.0.1"), Node: "n1"}
	apiOnN1   = onNode(api, "n1")
	n2        = Endpoint{Name: "node-n2", IP: netip.MustParseAddr("10.0.0.2"), Node: "n2"}
	hostnetN2 = Endpoint{Name: "hostnet-on-n2", Namespace: "prod", HostNetwork: true, IP: netip.MustParseAddr("10.0.0.2"), Node: "n2"}
)

func onNode(e Endpoint, node string) Endpoint {
	e.Node = node
	return e
}

func withPorts(e Endpoint) Endpoint {
	e.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}}
	return e
}

func withNSLabels(e Endpoint, kv ...string) Endpoint {
	e.NamespaceLabels = map[string]string{kv[0]: kv[1]}
	return e
}

func tcp(from, to Endpoint, port int32) Flow {
	return Flow{From: from, To: to, Protocol: corev1.ProtocolTCP, Port: port}
}
func udp(from, to Endpoint, port int32) Flow {
	return Flow{From: from, To: to, Protocol: corev1.ProtocolUDP, Port: port}
}

// TestSemantics: one case per rule of the NetworkPolicy API (the package
// comment lists them), each with flows on both sides of the rule.
func TestSemantics(t *testing.T) {
	selectWeb := "metadata: {name: p, namespace: prod}\nspec:\n  podSelector: {matchLabels: {app: web}}\n"
	tests := []struct {
		name  string
		pols  string
		allow []Flow
		deny  []Flow
	}{
		{"no policy selects the pod: everything allowed", "metadata: {name: p, namespace: prod}\nspec:\n  podSelector: {matchLabels: {app: db}}\n",
			[]Flow{tcp(api, web, 8080), tcp(internet, web, 1)}, nil},
		{"selected with no rules: default deny (policyTypes absent means Ingress)", selectWeb,
			[]Flow{tcp(web, api, 80)}, []Flow{tcp(api, web, 8080), udp(internet, web, 53)}},
		{"Egress-only policy leaves ingress alone, isolates egress", selectWeb + "  policyTypes: [Egress]\n",
			[]Flow{tcp(api, web, 8080)}, []Flow{tcp(web, api, 80), tcp(web, internet, 443)}},
		{"egress rules without policyTypes imply Egress", selectWeb + "  egress:\n  - to: [{podSelector: {matchLabels: {app: api}}}]\n",
			[]Flow{tcp(web, api, 80)}, []Flow{tcp(web, internet, 443), tcp(api, web, 8080)}},
		{"policy in another namespace does not select", "metadata: {name: p, namespace: dev}\nspec:\n  podSelector: {}\n",
			[]Flow{tcp(api, web, 8080)}, []Flow{tcp(api, other, 8080)}},
		{"empty podSelector selects every pod of the namespace", "metadata: {name: p, namespace: prod}\nspec:\n  podSelector: {}\n",
			nil, []Flow{tcp(web, api, 80), tcp(api, web, 8080)}},
		{"rule without from and ports allows all", selectWeb + "  ingress: [{}]\n",
			[]Flow{tcp(internet, web, 1), udp(node, web, 53), tcp(other, web, 65535)}, nil},
		{"podSelector peer means the policy's namespace only", selectWeb + "  ingress:\n  - from: [{podSelector: {matchLabels: {app: web}}}]\n",
			[]Flow{tcp(web, web, 8080)}, []Flow{tcp(other, web, 8080), tcp(api, web, 8080)}},
		{"namespaceSelector peer means every pod of those namespaces", selectWeb + "  ingress:\n  - from: [{namespaceSelector: {matchLabels: {team: obs}}}]\n",
			[]Flow{tcp(mon, web, 8080)}, []Flow{tcp(api, web, 8080), tcp(other, web, 8080)}},
		{"kubernetes.io/metadata.name is every namespace's label", selectWeb + "  ingress:\n  - from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: dev}}}]\n",
			[]Flow{tcp(other, web, 8080)}, []Flow{tcp(api, web, 8080)}},
		{"both selectors in one peer: AND", selectWeb + "  ingress:\n  - from: [{namespaceSelector: {matchLabels: {team: obs}}, podSelector: {matchLabels: {app: api}}}]\n",
			nil, []Flow{tcp(mon, web, 8080), tcp(api, web, 8080)}},
		{"two peers: OR", selectWeb + "  ingress:\n  - from: [{namespaceSelector: {matchLabels: {team: obs}}}, {podSelector: {matchLabels: {app: api}}}]\n",
			[]Flow{tcp(mon, web, 8080), tcp(api, web, 8080)}, []Flow{tcp(other, web, 8080)}},
		{"ipBlock with except", selectWeb + "  ingress:\n  - from: [{ipBlock: {cidr: 10.0.0.0/8, except: [10.244.0.0/24]}}]\n",
			[]Flow{tcp(node, web, 8080), tcp(other, web, 8080)}, []Flow{tcp(api, web, 8080), tcp(internet, web, 8080)}},
		{"hostNetwork source: ipBlock matches its node address, selectors never", selectWeb + "  ingress:\n  - from: [{podSelector: {matchLabels: {app: api}}}]\n" +
			"    ports: [{port: 1}]\n  - from: [{ipBlock: {cidr: 10.0.0.0/24}}]\n    ports: [{port: 2}]\n",
			[]Flow{tcp(agent, web, 2), tcp(api, web, 1)}, []Flow{tcp(agent, web, 1)}},
		{"port without protocol is TCP", selectWeb + "  ingress:\n  - ports: [{port: 53}]\n",
			[]Flow{tcp(api, web, 53)}, []Flow{udp(api, web, 53)}},
		{"protocol without port: every port of it", selectWeb + "  ingress:\n  - ports: [{protocol: UDP}]\n",
			[]Flow{udp(api, web, 1), udp(api, web, 65535)}, []Flow{tcp(api, web, 53)}},
		{"endPort range is inclusive", selectWeb + "  ingress:\n  - ports: [{protocol: TCP, port: 3480, endPort: 3490}]\n",
			[]Flow{tcp(api, web, 3480), tcp(api, web, 3490)}, []Flow{tcp(api, web, 3479), tcp(api, web, 3491)}},
		{"named port resolves on the destination", selectWeb + "  ingress:\n  - ports: [{port: http}, {protocol: UDP, port: dns}]\n",
			[]Flow{tcp(api, web, 8080), udp(api, web, 53)}, []Flow{tcp(api, web, 80), tcp(api, web, 53)}},
		{"policies are a union", selectWeb + "  ingress:\n  - from: [{podSelector: {matchLabels: {app: api}}}]\n    ports: [{port: 1}]\n---\n" +
			"metadata: {name: q, namespace: prod}\nspec:\n  podSelector: {matchLabels: {tier: front}}\n  ingress:\n  - from: [{ipBlock: {cidr: 0.0.0.0/0}}]\n    ports: [{port: 2}]\n",
			[]Flow{tcp(api, web, 1), tcp(internet, web, 2), tcp(api, web, 2)}, []Flow{tcp(internet, web, 1)}},
		{"matchExpressions In, NotIn, Exists, DoesNotExist", "metadata: {name: p, namespace: prod}\nspec:\n  podSelector:\n    matchExpressions:\n" +
			"    - {key: app, operator: In, values: [web, db]}\n    - {key: tier, operator: Exists}\n" +
			"  ingress:\n  - from:\n    - podSelector:\n        matchExpressions:\n        - {key: app, operator: NotIn, values: [web]}\n        - {key: tier, operator: DoesNotExist}\n",
			[]Flow{tcp(api, web, 8080), tcp(web, api, 80)}, []Flow{tcp(web, web, 8080)}},
		{"both directions must allow", selectWeb + "  policyTypes: [Ingress, Egress]\n  ingress:\n  - from: [{podSelector: {}}]\n" +
			"---\nmetadata: {name: q, namespace: prod}\nspec:\n  podSelector: {matchLabels: {app: api}}\n  policyTypes: [Egress]\n",
			nil, []Flow{tcp(api, web, 8080), tcp(web, web, 8080)}},
		{"a Pod's own node is always allowed, both ways; other nodes and same-node Pods are not", selectWeb +
			"  policyTypes: [Ingress, Egress]\n  ingress:\n  - from: [{ipBlock: {cidr: 192.0.2.0/24}}]\n  egress:\n  - to: [{ipBlock: {cidr: 192.0.2.0/24}}]\n",
			[]Flow{tcp(n1, webOnN1, 8080), tcp(hostnetN1, webOnN1, 3478), tcp(webOnN1, n1, 10250), tcp(webOnN1, hostnetN1, 9100)},
			[]Flow{tcp(n2, webOnN1, 8080), tcp(hostnetN2, webOnN1, 3478), tcp(apiOnN1, webOnN1, 8080), tcp(webOnN1, n2, 10250), tcp(internet, webOnN1, 8080)}},
		{"hostNetwork destination is never isolated", "metadata: {name: p, namespace: prod}\nspec:\n  podSelector: {}\n",
			[]Flow{tcp(internet, agent, 22)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pols := policies(t, tt.pols)
			for _, f := range tt.allow {
				if ok, err := Allowed(pols, f); err != nil || !ok {
					t.Errorf("%s: allowed=%v err=%v, want allowed", f, ok, err)
				}
			}
			for _, f := range tt.deny {
				if ok, err := Allowed(pols, f); err != nil || ok {
					t.Errorf("%s: allowed=%v err=%v, want denied", f, ok, err)
				}
			}
		})
	}
}

// TestInvalidPolicies: what the API server would reject is an error, not a
// silent allow or deny.
func TestInvalidPolicies(t *testing.T) {
	base := "metadata: {name: p, namespace: prod}\nspec:\n  podSelector: {}\n  ingress:\n"
	for name, rule := range map[string]string{
		"ipBlock with a selector":   "  - from: [{ipBlock: {cidr: 10.0.0.0/8}, podSelector: {}}]\n",
		"empty peer":                "  - from: [{}]\n",
		"bad cidr":                  "  - from: [{ipBlock: {cidr: 10.0.0.0}}]\n",
		"endPort below port":        "  - ports: [{port: 20, endPort: 10}]\n",
		"endPort with a named port": "  - ports: [{port: http, endPort: 10}]\n",
		"bad selector operator":     "  - from: [{podSelector: {matchExpressions: [{key: a, operator: Near}]}}]\n",
	} {
		t.Run(name, func(t *testing.T) {
			if ok, err := Allowed(policies(t, base+rule), tcp(api, withPorts(web), 8080)); err == nil {
				t.Errorf("no error (allowed=%v)", ok)
			}
		})
	}
}
