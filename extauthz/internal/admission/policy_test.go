package admission

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

const testPolicyName = "peer-keys"

// testPolicy is a policy in force: it matches CREATE and UPDATE of
// wirekubepeers (rule 0), pods (rule 1) and wirekubemeshes (rule 2), fails
// closed and type-checked cleanly.
func testPolicy(change func(*admissionv1.ValidatingAdmissionPolicy)) *admissionv1.ValidatingAdmissionPolicy {
	fail := admissionv1.Fail
	p := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: testPolicyName},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
				testRule("wirekube.io", "wirekubepeers", admissionv1.Create, admissionv1.Update, admissionv1.Delete),
				testRule("", "pods", admissionv1.Create, admissionv1.Update),
				testRule("wirekube.io", "wirekubemeshes", admissionv1.Create, admissionv1.Update),
			}}},
		Status: admissionv1.ValidatingAdmissionPolicyStatus{TypeChecking: &admissionv1.TypeChecking{}},
	}
	if change != nil {
		change(p)
	}
	return p
}

func testRule(group, resource string, ops ...admissionv1.OperationType) admissionv1.NamedRuleWithOperations {
	return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{Operations: ops,
		Rule: admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}}}}
}

func testBinding(change func(*admissionv1.ValidatingAdmissionPolicyBinding)) *admissionv1.ValidatingAdmissionPolicyBinding {
	b := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: testPolicyName},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: testPolicyName,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
	if change != nil {
		change(b)
	}
	return b
}

func TestJudgePeerAdmission(t *testing.T) {
	ignore := admissionv1.Ignore
	rules := func(f func(r *admissionv1.NamedRuleWithOperations)) func(*admissionv1.ValidatingAdmissionPolicy) {
		return func(p *admissionv1.ValidatingAdmissionPolicy) { f(&p.Spec.MatchConstraints.ResourceRules[0]) }
	}
	rule := func(i int, f func(r *admissionv1.NamedRuleWithOperations)) func(*admissionv1.ValidatingAdmissionPolicy) {
		return func(p *admissionv1.ValidatingAdmissionPolicy) { f(&p.Spec.MatchConstraints.ResourceRules[i]) }
	}
	only := func(n int) func(*admissionv1.ValidatingAdmissionPolicy) {
		return func(p *admissionv1.ValidatingAdmissionPolicy) {
			p.Spec.MatchConstraints.ResourceRules = p.Spec.MatchConstraints.ResourceRules[:n]
		}
	}
	tests := []struct {
		name string
		p    *admissionv1.ValidatingAdmissionPolicy
		b    *admissionv1.ValidatingAdmissionPolicyBinding
		want contract.PeerAdmissionState
	}{
		{"both as shipped", testPolicy(nil), testBinding(nil), "in_force"},
		{"failurePolicy unset is Fail", testPolicy(func(p *admissionv1.ValidatingAdmissionPolicy) { p.Spec.FailurePolicy = nil }), testBinding(nil), "in_force"},
		{"wildcard group, resource and operation", testPolicy(rules(func(r *admissionv1.NamedRuleWithOperations) {
			r.APIGroups, r.Resources, r.Operations = []string{"*"}, []string{"*"}, []admissionv1.OperationType{"*"}
		})), testBinding(nil), "in_force"},
		{"Deny and Audit", testPolicy(nil), testBinding(func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Audit, admissionv1.Deny}
		}), "in_force"},
		{"no policy", nil, testBinding(nil), "policy_missing"},
		{"no binding", testPolicy(nil), nil, "binding_missing"},
		{"binding of another policy", testPolicy(nil), testBinding(func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.PolicyName = "other"
		}), "binding_other_policy"},
		{"Warn only", testPolicy(nil), testBinding(func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn}
		}), "binding_not_deny"},
		{"failurePolicy Ignore", testPolicy(func(p *admissionv1.ValidatingAdmissionPolicy) { p.Spec.FailurePolicy = &ignore }), testBinding(nil), "fail_open"},
		{"matches another resource", testPolicy(rules(func(r *admissionv1.NamedRuleWithOperations) { r.Resources = []string{"pods"} })), testBinding(nil), "no_peer_rule"},
		{"matches no UPDATE", testPolicy(rules(func(r *admissionv1.NamedRuleWithOperations) {
			r.Operations = []admissionv1.OperationType{admissionv1.Create}
		})), testBinding(nil), "no_peer_rule"},
		{"only some peers by name", testPolicy(rules(func(r *admissionv1.NamedRuleWithOperations) { r.ResourceNames = []string{"node-a"} })), testBinding(nil), "no_peer_rule"},
		{"peers excluded", testPolicy(func(p *admissionv1.ValidatingAdmissionPolicy) {
			p.Spec.MatchConstraints.ExcludeResourceRules = p.Spec.MatchConstraints.ResourceRules
		}), testBinding(nil), "no_peer_rule"},
		{"no constraints", testPolicy(func(p *admissionv1.ValidatingAdmissionPolicy) { p.Spec.MatchConstraints = nil }), testBinding(nil), "no_peer_rule"},
		{"peers only (the policy of the release before)", testPolicy(only(1)), testBinding(nil), "no_pod_rule"},
		{"pod updates only", testPolicy(rule(1, func(r *admissionv1.NamedRuleWithOperations) {
			r.Operations = []admissionv1.OperationType{admissionv1.Update}
		})), testBinding(nil), "no_pod_rule"},
		{"pods of another group", testPolicy(rule(1, func(r *admissionv1.NamedRuleWithOperations) { r.APIGroups = []string{"apps"} })), testBinding(nil), "no_pod_rule"},
		{"only some Pods by name", testPolicy(rule(1, func(r *admissionv1.NamedRuleWithOperations) { r.ResourceNames = []string{"agent-a"} })), testBinding(nil), "no_pod_rule"},
		{"no mesh rule", testPolicy(only(2)), testBinding(nil), "no_mesh_rule"},
		{"mesh creates only", testPolicy(rule(2, func(r *admissionv1.NamedRuleWithOperations) {
			r.Operations = []admissionv1.OperationType{admissionv1.Create}
		})), testBinding(nil), "no_mesh_rule"},
		{"meshes excluded", testPolicy(func(p *admissionv1.ValidatingAdmissionPolicy) {
			p.Spec.MatchConstraints.ExcludeResourceRules = p.Spec.MatchConstraints.ResourceRules[2:]
		}), testBinding(nil), "no_mesh_rule"},
		{"type checking warns", testPolicy(func(p *admissionv1.ValidatingAdmissionPolicy) {
			p.Status.TypeChecking.ExpressionWarnings = []admissionv1.ExpressionWarning{{FieldRef: "spec.validations[0].expression", Warning: "no such key"}}
		}), testBinding(nil), "type_warnings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := judgePeerAdmission(testPolicyName, tt.p, tt.b); got != tt.want {
				t.Errorf("judgePeerAdmission = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestShippedPeerAdmissionInForce: the policy and binding the chart and
// manifests/components/peer-admission ship are judged in force under the
// default flag names.
func TestShippedPeerAdmissionInForce(t *testing.T) {
	data, err := os.ReadFile("../../../manifests/components/peer-admission/policy.yaml")
	must(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	p, b := &admissionv1.ValidatingAdmissionPolicy{}, &admissionv1.ValidatingAdmissionPolicyBinding{}
	must(t, dec.Decode(p))
	must(t, dec.Decode(b))
	o := DefaultOptions()
	if p.Name != o.PeerAdmissionPolicy || b.Name != o.PeerAdmissionBinding {
		t.Fatalf("shipped %s/%s, flag defaults %s/%s", p.Name, b.Name, o.PeerAdmissionPolicy, o.PeerAdmissionBinding)
	}
	if got := judgePeerAdmission(p.Name, p, b); got != contract.PeerAdmissionInForce {
		t.Errorf("shipped policy judged %s, want in_force", got)
	}
}

// admissionEnv runs a PeerAdmissionWatch over a fake clientset.
type admissionEnv struct {
	kube *fake.Clientset
	w    *Watch
	logs testutil.SyncBuffer
}

func startAdmissionWatch(t *testing.T, kube *fake.Clientset) *admissionEnv {
	t.Helper()
	e := &admissionEnv{kube: kube}
	var err error
	e.w, err = New(NoWatchList{Client: kube.AdmissionregistrationV1()}, testPolicyName, testPolicyName,
		prometheus.NewRegistry(), slog.New(slog.NewJSONHandler(&e.logs, nil)))
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

func (e *admissionEnv) wantState(t *testing.T, want contract.PeerAdmissionState) {
	t.Helper()
	testutil.Eventually(t, "state "+string(want), func() bool { return e.w.State() == want })
	inForce := 0.0
	if want == contract.PeerAdmissionInForce {
		inForce = 1
	}
	if got := promtest.ToFloat64(e.w.inForce); got != inForce {
		t.Errorf("%s = %v in state %s, want %v", contract.MetricPeerAdmissionInForce, got, want, inForce)
	}
	for _, s := range contract.PeerAdmissionStates {
		wantV := 0.0
		if s == want {
			wantV = 1
		}
		if got := promtest.ToFloat64(e.w.state.WithLabelValues(string(s))); got != wantV {
			t.Errorf("%s{state=%s} = %v in state %s, want %v", contract.MetricPeerAdmissionState, s, got, want, wantV)
		}
	}
}

// TestPeerAdmissionWatchFollowsObjects: the state follows the objects as
// they are created, changed and deleted, with one log line per change.
func TestPeerAdmissionWatchFollowsObjects(t *testing.T) {
	e := startAdmissionWatch(t, fake.NewClientset())
	ctx := context.Background()
	a := e.kube.AdmissionregistrationV1()
	e.wantState(t, contract.PeerAdmissionPolicyMissing)
	_, err := a.ValidatingAdmissionPolicies().Create(ctx, testPolicy(nil), metav1.CreateOptions{})
	must(t, err)
	e.wantState(t, contract.PeerAdmissionBindingMissing)
	// Another policy's binding and another name are not watched.
	_, err = a.ValidatingAdmissionPolicyBindings().Create(ctx, testBinding(func(b *admissionv1.ValidatingAdmissionPolicyBinding) { b.Name = "unrelated" }), metav1.CreateOptions{})
	must(t, err)
	_, err = a.ValidatingAdmissionPolicyBindings().Create(ctx, testBinding(nil), metav1.CreateOptions{})
	must(t, err)
	e.wantState(t, contract.PeerAdmissionInForce)
	_, err = a.ValidatingAdmissionPolicyBindings().Update(ctx, testBinding(func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
		b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn}
	}), metav1.UpdateOptions{})
	must(t, err)
	e.wantState(t, contract.PeerAdmissionNotDeny)
	must(t, a.ValidatingAdmissionPolicies().Delete(ctx, testPolicyName, metav1.DeleteOptions{}))
	e.wantState(t, contract.PeerAdmissionPolicyMissing)

	var states []string
	for line := range strings.Lines(e.logs.String()) {
		if i := strings.Index(line, `"state":"`); i >= 0 {
			states = append(states, strings.SplitN(line[i+9:], `"`, 2)[0])
		}
	}
	want := []string{"unknown", "policy_missing", "binding_missing", "in_force", "binding_not_deny", "policy_missing"}
	if strings.Join(states, ",") != strings.Join(want, ",") {
		t.Errorf("logged states %v, want %v", states, want)
	}
}

// TestPeerAdmissionWatchUnreadable: without RBAC to read the policy the
// state stays unknown and the reason is logged once, however often the
// informer retries.
func TestPeerAdmissionWatchUnreadable(t *testing.T) {
	kube := fake.NewClientset(testPolicy(nil), testBinding(nil))
	lists := make(chan struct{}, 100)
	kube.PrependReactor("list", "validatingadmissionpolicies", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists <- struct{}{}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "admissionregistration.k8s.io",
			Resource: "validatingadmissionpolicies"}, "", nil)
	})
	e := startAdmissionWatch(t, kube)
	for range 2 { // the first list and one retry
		<-lists
	}
	testutil.Eventually(t, "the refusal logged", func() bool { return strings.Contains(e.logs.String(), "cannot read") })
	if got := e.w.State(); got != contract.PeerAdmissionUnknown {
		t.Errorf("state %s, want unknown", got)
	}
	if n := strings.Count(e.logs.String(), "cannot read"); n != 1 {
		t.Errorf("%d log lines about the refusal, want 1", n)
	}
}

// TestPeerAdmissionNotWatched: an empty --peer-admission-policy reports
// not_watched and runs nothing.
func TestPeerAdmissionNotWatched(t *testing.T) {
	w, err := New(fake.NewClientset().AdmissionregistrationV1(), "", "", prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	must(t, err)
	if w.State() != contract.PeerAdmissionNotWatched || promtest.ToFloat64(w.inForce) != 0 {
		t.Errorf("state %s, in force %v; want not_watched, 0", w.State(), promtest.ToFloat64(w.inForce))
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
