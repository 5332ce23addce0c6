package manifests

import (
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wirekube/relay-ws/extauthz"
	"github.com/wirekube/relay-ws/internal/contract"
)

// The WireKubePeer admission policy (components/peer-admission, the chart's
// peerAdmission.install): what is rendered where. What it admits and refuses
// is proven against the real kube-apiserver (e2e TestE2E/peer_admission).

var peerAdmissionKinds = []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}

// withoutPeerAdmission drops the policy and its binding (for comparisons
// with kustomizations that do not add components/peer-admission).
func withoutPeerAdmission(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	return slices.DeleteFunc(slices.Clone(objs), func(o *unstructured.Unstructured) bool {
		return slices.Contains(peerAdmissionKinds, o.GetKind())
	})
}

// checkPeerAdmissionExample: the base intact, plus the policy and binding
// as extauthz's defaults name them, restricting the agent ServiceAccount
// extauthz's defaults name.
func checkPeerAdmissionExample(t *testing.T, r *rendered) {
	checkBaseIntact(t, r)
	checkPeerAdmission(t, r, extauthz.DefaultOptions().AgentServiceAccounts)
}

func checkPeerAdmission(t *testing.T, r *rendered, agents []string) {
	t.Helper()
	p := into[admissionv1.ValidatingAdmissionPolicy](t, r.one(t, "ValidatingAdmissionPolicy", contract.DefaultPeerAdmissionPolicy))
	b := into[admissionv1.ValidatingAdmissionPolicyBinding](t, r.one(t, "ValidatingAdmissionPolicyBinding", contract.DefaultPeerAdmissionBinding))
	mustf(t, b.Spec.PolicyName == p.Name, "binding names policy %q, want %q", b.Spec.PolicyName, p.Name)
	mustf(t, slices.Equal(b.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}), "binding actions %v, want [Deny]", b.Spec.ValidationActions)
	mustf(t, b.Spec.ParamRef == nil && b.Spec.MatchResources == nil, "binding narrows the policy: %+v", b.Spec)
	mustf(t, p.Spec.FailurePolicy != nil && *p.Spec.FailurePolicy == admissionv1.Fail, "failurePolicy %s, want Fail", ptrString(p.Spec.FailurePolicy))
	mustf(t, len(p.Spec.MatchConditions) == 1, "match conditions %v, want the agent ServiceAccounts only", p.Spec.MatchConditions)
	var quoted []string
	for _, a := range agents {
		quoted = append(quoted, "'system:serviceaccount:"+strings.Replace(a, "/", ":", 1)+"'")
	}
	want := "request.userInfo.username in [" + strings.Join(quoted, ", ") + "]"
	if len(p.Spec.MatchConditions) == 1 {
		mustf(t, p.Spec.MatchConditions[0].Expression == want, "match condition %q, want %q", p.Spec.MatchConditions[0].Expression, want)
	}
	mustf(t, len(p.Spec.Validations) == 9, "%d validations, want 9 (peers: create, key, owners, delete; pods: own, fields; "+
		"meshes: no create, kept fields, defaults)", len(p.Spec.Validations))
	checkAgentWriteRules(t, p.Spec.MatchConstraints)
}

// checkAgentWriteRules: the policy matches, besides WireKubePeers, Pod and
// WireKubeMesh creates and updates (a patch of any type is an UPDATE; a
// server-side apply of a missing object a CREATE), each in a rule of its own
// with every version and no resource names, and excludes nothing.
func checkAgentWriteRules(t *testing.T, m *admissionv1.MatchResources) {
	t.Helper()
	if m == nil {
		t.Fatal("policy without matchConstraints")
	}
	mustf(t, len(m.ExcludeResourceRules) == 0, "policy excludes %v", m.ExcludeResourceRules)
	want := map[string][]admissionv1.OperationType{
		"wirekube.io/wirekubepeers":  {admissionv1.Create, admissionv1.Update, admissionv1.Delete},
		"/pods":                      {admissionv1.Create, admissionv1.Update},
		"wirekube.io/wirekubemeshes": {admissionv1.Create, admissionv1.Update},
	}
	got := map[string][]admissionv1.OperationType{}
	for _, r := range m.ResourceRules {
		mustf(t, len(r.APIGroups) == 1 && len(r.Resources) == 1 && len(r.ResourceNames) == 0 &&
			slices.Equal(r.APIVersions, []string{"*"}), "rule %+v: want one group, one resource, every version, no names", r)
		if len(r.APIGroups) == 1 && len(r.Resources) == 1 {
			got[r.APIGroups[0]+"/"+r.Resources[0]] = r.Operations
		}
	}
	mustf(t, len(got) == len(want), "rules for %v, want %v", got, want)
	for res, ops := range want {
		mustf(t, slices.Equal(got[res], ops), "%s: operations %v, want %v", res, got[res], ops)
	}
}

// TestChartPeerAdmission: rendered by default (an offline render knows only
// the Kubernetes version), not where the cluster's API list lacks the kind,
// forced by always, never with never; NOTES says which.
func TestChartPeerAdmission(t *testing.T) {
	const (
		kinds = "apps/v1/Deployment" // a live cluster's list names kinds
		vap   = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"
	)
	for _, tt := range []struct {
		name  string
		args  []string
		want  bool
		notes string
	}{
		{"offline render", nil, true, "installed (wirekube-relay-gateway-peer-keys)"},
		{"cluster with the API", []string{"--api-versions", kinds, "--api-versions", vap}, true, "installed"},
		{"cluster without the API", []string{"--api-versions", kinds}, false,
			"not installed: the cluster does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy"},
		{"always", []string{"--api-versions", kinds, "--set", "peerAdmission.install=always"}, true, "installed"},
		{"never", []string{"--set", "peerAdmission.install=never"}, false, "not installed (peerAdmission.install=never)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := renderChart(t, tt.args...)
			got := len(r.all("ValidatingAdmissionPolicy")) + len(r.all("ValidatingAdmissionPolicyBinding"))
			switch {
			case tt.want && got != 2, !tt.want && got != 0:
				t.Fatalf("%d admission objects, want them rendered: %v", got, tt.want)
			case tt.want:
				checkPeerAdmission(t, r, extauthz.DefaultOptions().AgentServiceAccounts)
			}
			notes := renderNotes(t, tt.args...)
			mustf(t, strings.Contains(notes, "WireKubePeer admission policy (docs/revocation.md#admission): "+tt.notes),
				"NOTES without %q:\n%s", tt.notes, notes)
		})
	}
}

// TestChartPeerAdmissionAgents: the policy restricts every
// extauthz.agentServiceAccounts identity.
func TestChartPeerAdmissionAgents(t *testing.T) {
	agents := []string{"wirekube-system/wirekube-agent", "mesh/agent-2"}
	r := renderChart(t, "--set", "extauthz.agentServiceAccounts={"+strings.Join(agents, ",")+"}")
	checkPeerAdmission(t, r, agents)
}

func ptrString[T ~string](p *T) string {
	if p == nil {
		return "unset"
	}
	return string(*p)
}
