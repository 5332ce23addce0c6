// Package netpol evaluates Kubernetes NetworkPolicies (networking.k8s.io/v1)
// for one flow at a time, so that tests can hold rendered manifests to a
// table of flows that must be allowed or denied. It implements the API's
// documented semantics (see the package tests, one case per rule):
//
//   - A Pod is isolated for ingress (egress) when at least one policy in its
//     namespace selects it and has Ingress (Egress) in policyTypes; absent
//     policyTypes mean Ingress, plus Egress when the policy has egress rules.
//   - A non-isolated Pod allows everything in that direction.
//   - An isolated Pod allows a flow that at least one rule of at least one
//     selecting policy allows (policies and rules are a union).
//   - A rule with no from/to peers matches every peer; no ports, every port.
//   - A peer with only podSelector means Pods in the policy's namespace; with
//     only namespaceSelector, every Pod of those namespaces; with both, Pods
//     matching both; ipBlock, addresses in cidr minus except.
//   - A port with no protocol is TCP; no port, every port of the protocol;
//     endPort makes an inclusive range; a named port is resolved against the
//     destination Pod's container ports.
//   - A flow is allowed when the source's egress and the destination's
//     ingress both allow it.
//
// One exception the API documents (the Kubernetes NetworkPolicy page, "IP
// blocks"): traffic to and from the node where a Pod is running is always
// allowed, whatever the policies say. A flow between a Pod and its own node
// (the node's address, or a hostNetwork Pod on that node) is allowed in
// both directions before any policy is read.
//
// What the API leaves to the network plugin is modelled the way common
// plugins behave and named here: traffic from or to a hostNetwork Pod or a
// node carries the node's address and is matched by ipBlock only, never by
// a Pod or namespace selector, and a hostNetwork Pod is never isolated.
package netpol

import (
	"cmp"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Endpoint is one end of a flow: a Pod, or an address outside the Pod
// network (a node, a hostNetwork Pod, a client on the internet).
type Endpoint struct {
	Name string // for messages
	// Namespace and the labels are those of a Pod; Namespace is empty for
	// an address outside the Pod network.
	Namespace       string
	NamespaceLabels map[string]string // kubernetes.io/metadata.name is implied
	Labels          map[string]string
	// HostNetwork: a Pod on its node's network (the WireKube agent). It is
	// matched like its node's address.
	HostNetwork bool
	IP          netip.Addr
	// Node is the node a Pod runs on, or the node an address outside the
	// Pod network (a hostNetwork Pod, a node's own address) belongs to;
	// empty for an address of no node (the internet).
	Node string
	// Ports are the Pod's container ports, for named ports in policies.
	Ports []corev1.ContainerPort
}

// selectable reports whether selectors can match e (a Pod on the Pod
// network).
func (e Endpoint) selectable() bool { return e.Namespace != "" && !e.HostNetwork }

// ownNode reports whether peer is the node pod runs on (its address or a
// hostNetwork Pod there): NetworkPolicy always allows that traffic.
func ownNode(pod, peer Endpoint) bool {
	return !peer.selectable() && peer.Node != "" && peer.Node == pod.Node
}

func (e Endpoint) namespaceLabels() labels.Set {
	set := labels.Set{}
	for k, v := range e.NamespaceLabels {
		set[k] = v
	}
	set["kubernetes.io/metadata.name"] = e.Namespace
	return set
}

// Flow is one connection attempt (or UDP datagram) from From to To.
type Flow struct {
	From, To Endpoint
	Protocol corev1.Protocol
	Port     int32
}

func (f Flow) String() string {
	return fmt.Sprintf("%s -> %s %s/%d", f.From.Name, f.To.Name, f.Protocol, f.Port)
}

// Allowed reports whether policies (every policy in the cluster) allow f.
// An error means a policy is invalid in a way the API server would reject.
func Allowed(policies []networkingv1.NetworkPolicy, f Flow) (bool, error) {
	in, err := direction(policies, f, networkingv1.PolicyTypeIngress)
	if err != nil || !in {
		return false, err
	}
	return direction(policies, f, networkingv1.PolicyTypeEgress)
}

// direction evaluates one side: the destination's ingress or the source's
// egress.
func direction(policies []networkingv1.NetworkPolicy, f Flow, dir networkingv1.PolicyType) (bool, error) {
	subject, peer := f.To, f.From
	if dir == networkingv1.PolicyTypeEgress {
		subject, peer = f.From, f.To
	}
	if !subject.selectable() {
		return true, nil // policies select Pods on the Pod network only
	}
	if ownNode(subject, peer) {
		return true, nil // no policy restricts a Pod's own node
	}
	isolated := false
	for i := range policies {
		p := &policies[i]
		sel, err := selects(p, subject, dir)
		if err != nil {
			return false, err
		}
		if !sel {
			continue
		}
		isolated = true
		ok, err := policyAllows(p, dir, peer, subject, f)
		if err != nil || ok {
			return ok, err
		}
	}
	return !isolated, nil
}

// selects reports whether p isolates subject in direction dir.
func selects(p *networkingv1.NetworkPolicy, subject Endpoint, dir networkingv1.PolicyType) (bool, error) {
	if p.Namespace != subject.Namespace || !hasType(p, dir) {
		return false, nil
	}
	return matchSelector(&p.Spec.PodSelector, subject.Labels)
}

func hasType(p *networkingv1.NetworkPolicy, dir networkingv1.PolicyType) bool {
	if len(p.Spec.PolicyTypes) == 0 {
		return dir == networkingv1.PolicyTypeIngress || len(p.Spec.Egress) > 0
	}
	for _, t := range p.Spec.PolicyTypes {
		if t == dir {
			return true
		}
	}
	return false
}

// policyAllows reports whether one rule of p in direction dir admits peer on
// f's port of subject (ingress: the destination's port; egress: also the
// destination's).
func policyAllows(p *networkingv1.NetworkPolicy, dir networkingv1.PolicyType, peer, subject Endpoint, f Flow) (bool, error) {
	type rule struct {
		peers []networkingv1.NetworkPolicyPeer
		ports []networkingv1.NetworkPolicyPort
	}
	var rules []rule
	if dir == networkingv1.PolicyTypeIngress {
		for _, r := range p.Spec.Ingress {
			rules = append(rules, rule{r.From, r.Ports})
		}
	} else {
		for _, r := range p.Spec.Egress {
			rules = append(rules, rule{r.To, r.Ports})
		}
	}
	for _, r := range rules {
		okPeer, err := peersMatch(p.Namespace, r.peers, peer)
		if err != nil {
			return false, err
		}
		okPort, err := portsMatch(r.ports, f)
		if err != nil {
			return false, err
		}
		if okPeer && okPort {
			return true, nil
		}
	}
	return false, nil
}

func peersMatch(policyNS string, peers []networkingv1.NetworkPolicyPeer, e Endpoint) (bool, error) {
	if len(peers) == 0 {
		return true, nil
	}
	for _, p := range peers {
		ok, err := peerMatches(policyNS, p, e)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

func peerMatches(policyNS string, p networkingv1.NetworkPolicyPeer, e Endpoint) (bool, error) {
	if p.IPBlock != nil {
		if p.PodSelector != nil || p.NamespaceSelector != nil {
			return false, fmt.Errorf("netpol: a peer with ipBlock must not have selectors")
		}
		return inBlock(p.IPBlock, e.IP)
	}
	if p.PodSelector == nil && p.NamespaceSelector == nil {
		return false, fmt.Errorf("netpol: a peer needs podSelector, namespaceSelector or ipBlock")
	}
	if !e.selectable() {
		return false, nil
	}
	if p.NamespaceSelector == nil {
		if e.Namespace != policyNS {
			return false, nil
		}
	} else if ok, err := matchSelector(p.NamespaceSelector, e.namespaceLabels()); err != nil || !ok {
		return false, err
	}
	if p.PodSelector == nil {
		return true, nil
	}
	return matchSelector(p.PodSelector, e.Labels)
}

func inBlock(b *networkingv1.IPBlock, ip netip.Addr) (bool, error) {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return false, fmt.Errorf("netpol: ipBlock cidr: %w", err)
	}
	if !ip.IsValid() || !cidr.Contains(ip) {
		return false, nil
	}
	for _, ex := range b.Except {
		p, err := netip.ParsePrefix(ex)
		if err != nil {
			return false, fmt.Errorf("netpol: ipBlock except: %w", err)
		}
		if p.Contains(ip) {
			return false, nil
		}
	}
	return true, nil
}

func portsMatch(ports []networkingv1.NetworkPolicyPort, f Flow) (bool, error) {
	if len(ports) == 0 {
		return true, nil
	}
	for _, p := range ports {
		ok, err := portMatches(p, f)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

func portMatches(p networkingv1.NetworkPolicyPort, f Flow) (bool, error) {
	proto := corev1.ProtocolTCP
	if p.Protocol != nil {
		proto = *p.Protocol
	}
	if proto != f.Protocol {
		return false, nil
	}
	if p.Port == nil {
		return true, nil
	}
	if p.Port.Type == intstr.String {
		if p.EndPort != nil {
			return false, fmt.Errorf("netpol: endPort with a named port %q", p.Port.StrVal)
		}
		for _, cp := range f.To.Ports {
			cpProto := cmp.Or(cp.Protocol, corev1.ProtocolTCP)
			if cp.Name == p.Port.StrVal && cpProto == proto && cp.ContainerPort == f.Port {
				return true, nil
			}
		}
		return false, nil
	}
	if p.EndPort != nil {
		if *p.EndPort < p.Port.IntVal {
			return false, fmt.Errorf("netpol: endPort %d below port %d", *p.EndPort, p.Port.IntVal)
		}
		return p.Port.IntVal <= f.Port && f.Port <= *p.EndPort, nil
	}
	return p.Port.IntVal == f.Port, nil
}

func matchSelector(s *metav1.LabelSelector, set map[string]string) (bool, error) {
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return false, fmt.Errorf("netpol: selector: %w", err)
	}
	return sel.Matches(labels.Set(set)), nil
}
