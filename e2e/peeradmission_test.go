//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/relayproto"
)

// The WireKubePeer admission policy (manifests/components/peer-admission,
// the chart's default) enforced by the real kube-apiserver. The requests
// below have the shapes WireKube's agent sends (read from WireKube v0.0.17
// and main 87a21b8; none of its code is used here): each helper names the
// file and function it reproduces. They run as the agent ServiceAccount with
// a Pod-bound token of a Pod on the node, as the DaemonSet's projected token
// is, so the API server puts the node into
// request.userInfo.extra["authentication.kubernetes.io/node-name"].

const (
	admissionPolicy = "wirekube-relay-gateway-peer-keys"
	// gatewayCIDRs is the annotation pkg/agent/gateway.go keeps the routes
	// it injected in.
	gatewayCIDRs = "wirekube.io/gateway-cidrs"
	// agentManagedLabel marks the peers an agent created (pkg/agent/agent.go
	// agentManagedPeerLabel): orphan clean-up deletes only those.
	agentManagedLabel = "wirekube.io/node"
)

var (
	vapGVR  = admissionGVR("validatingadmissionpolicies")
	vapbGVR = admissionGVR("validatingadmissionpolicybindings")
)

// testPeerAdmission: with the shipped policy installed, everything the
// upstream agent does to its own and to other nodes' WireKubePeers is
// admitted, and the key move of docs/revocation.md#admission (node M writes a
// fresh key into victim V's peer, then V's key into its own) is refused at
// its first step, as are the other ways to free V's key for M.
func (e *env) testPeerAdmission(t *testing.T) {
	e.grantAgentPeerRBAC(t)
	e.installPeerAdmission(t)
	v, m := e.admissionAgent(t, "adm-v", true), e.admissionAgent(t, "adm-m", true)
	e.waitPolicyEnforced(t, m)
	keyV, keyM := e.newKey(t).Base64(), e.newKey(t).Base64()

	// Allowed: each agent publishes and rotates its own peer.
	wantPolicyAdmitted(t, "V creates its own peer", v.upsertOwnPeerCreate(keyV))
	wantPolicyAdmitted(t, "M creates its own peer", m.upsertOwnPeerCreate(e.newKey(t).Base64()))
	wantPolicyAdmitted(t, "M rotates its own key", m.upsertOwnPeerPatch(keyM, "198.51.100.20:51820"))
	wantPolicyAdmitted(t, "M writes its own status", m.updateOwnStatus())
	// Allowed: what an agent does to OTHER peers.
	wantPolicyAdmitted(t, "M reflects V's NAT endpoint", m.reflectNATEndpoint(v.node, "203.0.113.7:41641"))
	wantPolicyAdmitted(t, "M injects gateway routes into V", m.injectGatewayRoutes(v.node, "192.168.50.0/24"))
	orphan := e.legacyOrphanPeer(t, "adm-gone")
	wantPolicyAdmitted(t, "M deletes an orphaned peer without a Node owner", m.cleanupOrphanedPeer(orphan))

	// Refused: M's moves.
	wantPolicyRefused(t, "M patches V's key", m.patchKey(v.node, e.newKey(t).Base64()))
	wantPolicyRefused(t, "M updates V with another key", m.updateKey(v.node, e.newKey(t).Base64()))
	wantPolicyRefused(t, "M creates a peer named after another node", m.createPeer("adm-x", e.newKey(t).Base64()))
	wantPolicyRefused(t, "M strips V's Node owner", m.stripOwners(v.node))
	wantPolicyRefused(t, "M deletes V's Node-owned peer", m.cleanupOrphanedPeer(v.node))
	if got := e.peerKeyOf(t, v.node); got != keyV {
		t.Fatalf("V's key changed to %s after the refusals", keyPrint(got))
	}
	// M may still copy V's key into its own peer (the policy cannot see other
	// peers): then two peers hold it and the gateway refuses both
	// (peer_key_duplicate, docs/revocation.md#keys).
	wantPolicyAdmitted(t, "M copies V's key into its own peer", m.upsertOwnPeerPatch(keyV, ""))

	// A token bound to no node owns no peer: creates and key changes refused,
	// the other agent requests still admitted.
	u := e.admissionAgent(t, "adm-unbound", false)
	wantPolicyRefused(t, "unbound token creates its node's peer", u.upsertOwnPeerCreate(e.newKey(t).Base64()))
	wantPolicyRefused(t, "unbound token patches a key", u.patchKey(m.node, e.newKey(t).Base64()))
	wantPolicyAdmitted(t, "unbound token reflects an endpoint", u.reflectNATEndpoint(v.node, "203.0.113.8:41641"))

	// The gateway knows: extauthz (RBAC of manifests/base) reports the policy
	// in force, and not in force once the binding is gone.
	e.waitAdmissionState(t, contract.PeerAdmissionInForce)
	err := e.cluster.Dynamic.Resource(vapbGVR).Delete(context.Background(), admissionPolicy, metav1.DeleteOptions{})
	fatalIf(t, err)
	e.waitAdmissionState(t, contract.PeerAdmissionBindingMissing)
}

// waitAdmissionState waits until extauthz's /metrics has
// wirekube_extauthz_peer_admission_state{state=want} at 1 and
// wirekube_extauthz_peer_admission_in_force as want implies.
func (e *env) waitAdmissionState(t *testing.T, want contract.PeerAdmissionState) {
	t.Helper()
	inForce := "0"
	if want == contract.PeerAdmissionInForce {
		inForce = "1"
	}
	lines := []string{contract.MetricPeerAdmissionState + `{state="` + string(want) + `"} 1`,
		contract.MetricPeerAdmissionInForce + " " + inForce}
	e.waitExtauthzMetricLines(t, lines...)
}

// waitExtauthzMetricLines waits (up to a minute) until extauthz's /metrics
// has every one of lines as a whole line.
func (e *env) waitExtauthzMetricLines(t *testing.T, lines ...string) {
	t.Helper()
	err := stack.WaitFor(context.Background(), nil, 60*time.Second, func(ctx context.Context) error {
		body, err := scrape("http://" + e.stack.ExtauthzMetrics + "/metrics")
		if err != nil {
			return err
		}
		for _, l := range lines {
			if !strings.Contains(body, "\n"+l+"\n") {
				return fmt.Errorf("extauthz /metrics has no line %q", l)
			}
		}
		return nil
	})
	fatalIf(t, err)
}

func scrape(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func wantPolicyAdmitted(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v, want admitted", what, err)
	}
}

// wantPolicyRefused wants the policy's refusal: 403 Forbidden from the
// ValidatingAdmissionPolicy (RBAC allows every verb here).
func wantPolicyRefused(t *testing.T, what string, err error) {
	t.Helper()
	var st apierrors.APIStatus
	switch {
	case err == nil:
		t.Errorf("%s: admitted, want refused by %s", what, admissionPolicy)
	case !apierrors.IsForbidden(err):
		t.Errorf("%s: %v, want 403 Forbidden", what, err)
	case !asStatus(err, &st) || !containsAll(st.Status().Message, "ValidatingAdmissionPolicy", admissionPolicy):
		t.Errorf("%s: %v, want the refusal of %s (not RBAC)", what, err, admissionPolicy)
	}
}

// grantAgentPeerRBAC gives the agent ServiceAccount the WireKubePeer, Pod
// and WireKubeMesh rules of WireKube's agent ClusterRole
// (config/agent/rbac.yaml and the chart's templates/agent/rbac.yaml, v0.0.17
// and main: every verb on every WireKubePeer and its status; get and patch
// of every Pod; get, list, update and watch of every WireKubeMesh, get,
// patch and update of its status).
func (e *env) grantAgentPeerRBAC(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	name := "e2e-wirekube-agent-peers"
	rbac := e.cluster.Client.RbacV1()
	_, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"wirekube.io"}, Resources: []string{"wirekubepeers"},
				Verbs: []string{"get", "list", "create", "patch", "update", "delete", "watch"}},
			{APIGroups: []string{"wirekube.io"}, Resources: []string{"wirekubepeers/status"},
				Verbs: []string{"get", "patch", "update"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}},
			{APIGroups: []string{"wirekube.io"}, Resources: []string{"wirekubemeshes"},
				Verbs: []string{"get", "list", "update", "watch"}},
			{APIGroups: []string{"wirekube.io"}, Resources: []string{"wirekubemeshes/status"},
				Verbs: []string{"get", "patch", "update"}},
		}}, metav1.CreateOptions{})
	fatalIf(t, err)
	_, err = rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: stack.Namespace, Name: agentSA}},
	}, metav1.CreateOptions{})
	fatalIf(t, err)
	t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	})
}

// installPeerAdmission applies the policy and binding exactly as
// examples/peer-admission renders them (the base and the component).
func (e *env) installPeerAdmission(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	objs, err := stack.RenderKustomize(ctx, filepath.Join(e.repo, "manifests", "examples", "peer-admission"))
	fatalIf(t, err)
	var adm []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetAPIVersion() == "admissionregistration.k8s.io/v1" {
			adm = append(adm, o)
		}
	}
	if len(adm) != 2 {
		t.Fatalf("examples/peer-admission renders %d admissionregistration objects, want the policy and its binding", len(adm))
	}
	fatalIf(t, e.cluster.Apply(ctx, adm, false))
	t.Cleanup(func() { e.removePeerAdmission(t) })
}

func (e *env) removePeerAdmission(t *testing.T) {
	ctx := context.Background()
	for _, gvr := range []schema.GroupVersionResource{vapbGVR, vapGVR} {
		err := e.cluster.Dynamic.Resource(gvr).Delete(ctx, admissionPolicy, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s %s: %v", gvr.Resource, admissionPolicy, err)
		}
	}
}

// waitPolicyEnforced waits until the API server enforces the binding (its
// admission plugin learns policies from its own informers) by sending a
// dry-run create the policy refuses. The policy's status.typeChecking is
// written by kube-controller-manager, which this cluster does not run: an
// expression that fails at admission time shows here as a refused request
// the agent legitimately sends (failurePolicy Fail), which the test checks.
func (e *env) waitPolicyEnforced(t *testing.T, a *admissionClient) {
	t.Helper()
	err := stack.WaitFor(context.Background(), nil, 60*time.Second, func(ctx context.Context) error {
		err := a.createPeerOpts("adm-probe", e.newKey(t).Base64(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("dry-run create of another node's peer: %v, want Forbidden", err)
		}
		return nil
	})
	fatalIf(t, err)
}

// legacyOrphanPeer creates (as admin) an agent-managed WireKubePeer whose
// Node does not exist and that has no Node owner: what an agent older than
// WireKube's owner references left behind (pkg/agent/agent.go
// cleanupOrphanedPeers is the safety net for it).
func (e *env) legacyOrphanPeer(t *testing.T, name string) string {
	t.Helper()
	u := peerObject(name, e.newKey(t).Base64())
	u.SetLabels(map[string]string{agentManagedLabel: name})
	_, err := e.cluster.Dynamic.Resource(stack.PeerGVR).Create(context.Background(), u, metav1.CreateOptions{})
	fatalIf(t, err)
	return name
}

func (e *env) peerKeyOf(t *testing.T, name string) string {
	t.Helper()
	u, err := e.cluster.Dynamic.Resource(stack.PeerGVR).Get(context.Background(), name, metav1.GetOptions{})
	fatalIf(t, err)
	k, _, _ := unstructured.NestedString(u.Object, "spec", "publicKey")
	return k
}

// admissionAgent is a Node, an agent Pod on it and a client of the API
// server authenticated with the Pod-bound agent token (audience: the API
// server), or with an agent token bound to nothing when !bound.
func (e *env) admissionAgent(t *testing.T, node string, bound bool) *admissionClient {
	t.Helper()
	ctx := context.Background()
	n, err := e.cluster.CreateNode(ctx, node)
	fatalIf(t, err)
	o := stack.TokenOptions{Audience: stack.Issuer}
	podName := ""
	if bound {
		pod, err := e.cluster.CreatePod(ctx, stack.Namespace, "agent-"+node, agentSA, node)
		fatalIf(t, err)
		o.BoundKind, o.BoundName, o.BoundUID = "Pod", pod.Name, string(pod.UID)
		podName = pod.Name
	}
	cfg := rest.AnonymousClientConfig(e.cluster.Config)
	cfg.BearerToken = e.tokenFor(t, stack.Namespace, agentSA, o)
	dyn, err := dynamic.NewForConfig(cfg)
	fatalIf(t, err)
	return &admissionClient{node: node, nodeUID: n.UID, peers: dyn.Resource(stack.PeerGVR),
		ns: stack.Namespace, podName: podName, pods: dyn.Resource(podGVR), meshes: dyn.Resource(meshGVR)}
}

func admissionGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: resource}
}

// keyPrint is the fingerprint of a base64 key for failure messages.
func keyPrint(s string) string {
	k, err := relayproto.ParseKey(s)
	if err != nil {
		return "no key"
	}
	return fingerprint(k)
}
