// Package admission reports whether the WireKubePeer admission policy
// (docs/revocation.md#admission) is in force: policy.go decides it, watch.go
// watches the two objects and reports the answer. The answer is information
// for the operator: no check ever depends on it (a missing policy must not
// break a running install).
package admission

import (
	"slices"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	"github.com/wirekube/relay-ws/extauthz/internal/kubewatch"
	"github.com/wirekube/relay-ws/internal/contract"
)

// judgePeerAdmission is the state of the policy named policyName and its
// binding (nil: not found). The first failing condition decides, in the
// order of contract.PeerAdmissionStates.
func judgePeerAdmission(policyName string, p *admissionv1.ValidatingAdmissionPolicy,
	b *admissionv1.ValidatingAdmissionPolicyBinding) contract.PeerAdmissionState {
	switch {
	case p == nil:
		return contract.PeerAdmissionPolicyMissing
	case b == nil:
		return contract.PeerAdmissionBindingMissing
	case b.Spec.PolicyName != policyName:
		return contract.PeerAdmissionBindingOtherPolicy
	case !slices.Contains(b.Spec.ValidationActions, admissionv1.Deny):
		return contract.PeerAdmissionNotDeny
	case p.Spec.FailurePolicy != nil && *p.Spec.FailurePolicy == admissionv1.Ignore:
		return contract.PeerAdmissionFailOpen // nil is Fail, the API default
	case !matchesWrites(p.Spec.MatchConstraints, kubewatch.PeerGVR.Group, kubewatch.PeerGVR.Resource):
		return contract.PeerAdmissionNoPeerRule
	case !matchesWrites(p.Spec.MatchConstraints, "", "pods"):
		return contract.PeerAdmissionNoPodRule
	case !matchesWrites(p.Spec.MatchConstraints, kubewatch.PeerGVR.Group, "wirekubemeshes"):
		return contract.PeerAdmissionNoMeshRule
	case p.Status.TypeChecking != nil && len(p.Status.TypeChecking.ExpressionWarnings) > 0:
		return contract.PeerAdmissionTypeWarnings
	}
	return contract.PeerAdmissionInForce
}

// matchesWrites reports whether the policy's constraints match CREATE and
// UPDATE (every patch type is an UPDATE, a server-side apply of a missing
// object a CREATE) of every object of group/resource (wildcards count) and
// exclude neither. It does not judge the expressions: an operator's
// equivalent policy is trusted to say what the shipped one says.
func matchesWrites(m *admissionv1.MatchResources, group, resource string) bool {
	if m == nil {
		return false
	}
	for _, op := range []admissionv1.OperationType{admissionv1.Create, admissionv1.Update} {
		if !rulesMatch(m.ResourceRules, group, resource, op) || rulesMatch(m.ExcludeResourceRules, group, resource, op) {
			return false
		}
	}
	return true
}

func rulesMatch(rules []admissionv1.NamedRuleWithOperations, group, resource string, op admissionv1.OperationType) bool {
	for _, r := range rules {
		if (len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, "*")) &&
			anyOf(r.APIGroups, group) && anyOf(r.Resources, resource) &&
			(slices.Contains(r.Operations, op) || slices.Contains(r.Operations, admissionv1.OperationAll)) {
			return true
		}
	}
	return false
}

// anyOf reports whether list holds want or the wildcard.
func anyOf(list []string, want string) bool {
	return slices.Contains(list, want) || slices.Contains(list, "*")
}
