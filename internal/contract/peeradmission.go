package contract

// The WireKubePeer admission policy (docs/revocation.md#admission): whether
// it is in force, as wirekube-extauthz sees it. The states are the `state`
// label of MetricPeerAdmissionState, the `state` field of extauthz's log
// line and what wirekube-relay-probe sessions prints per gateway Pod.

// PeerAdmissionState is one answer to "are WireKubePeer keys
// node-restricted?".
type PeerAdmissionState string

const (
	// PeerAdmissionInForce: the named policy and binding exist, the binding
	// refers to the policy with the action Deny, the policy fails closed,
	// matches WireKubePeer, Pod and WireKubeMesh creates and updates, and
	// type-checked without warnings.
	PeerAdmissionInForce PeerAdmissionState = "in_force"
	// PeerAdmissionUnknown: not read yet, or extauthz cannot read the
	// objects (RBAC, an API server without the API); the log says why.
	PeerAdmissionUnknown PeerAdmissionState = "unknown"
	// PeerAdmissionNotWatched: --peer-admission-policy is empty.
	PeerAdmissionNotWatched PeerAdmissionState = "not_watched"
	// PeerAdmissionPolicyMissing: no ValidatingAdmissionPolicy of that name.
	PeerAdmissionPolicyMissing PeerAdmissionState = "policy_missing"
	// PeerAdmissionBindingMissing: no ValidatingAdmissionPolicyBinding of
	// that name.
	PeerAdmissionBindingMissing PeerAdmissionState = "binding_missing"
	// PeerAdmissionBindingOtherPolicy: the binding names another policy.
	PeerAdmissionBindingOtherPolicy PeerAdmissionState = "binding_other_policy"
	// PeerAdmissionNotDeny: the binding's validationActions lack Deny (Warn
	// or Audit only: nothing is refused).
	PeerAdmissionNotDeny PeerAdmissionState = "binding_not_deny"
	// PeerAdmissionFailOpen: the policy's failurePolicy is Ignore (an
	// expression error admits the request).
	PeerAdmissionFailOpen PeerAdmissionState = "fail_open"
	// PeerAdmissionNoPeerRule: the policy does not match CREATE and UPDATE
	// of wirekube.io wirekubepeers.
	PeerAdmissionNoPeerRule PeerAdmissionState = "no_peer_rule"
	// PeerAdmissionNoPodRule: the policy does not match CREATE and UPDATE
	// of every Pod (a policy from before it restricted the agent's Pod
	// patches: one node's agent may rewrite another's agent Pod).
	PeerAdmissionNoPodRule PeerAdmissionState = "no_pod_rule"
	// PeerAdmissionNoMeshRule: the policy does not match CREATE and UPDATE
	// of wirekube.io wirekubemeshes (one node's agent may rewrite the
	// mesh's relay settings).
	PeerAdmissionNoMeshRule PeerAdmissionState = "no_mesh_rule"
	// PeerAdmissionTypeWarnings: the API server's type checking of the
	// policy reported warnings (status.typeChecking): an expression may
	// fail at admission time.
	PeerAdmissionTypeWarnings PeerAdmissionState = "type_warnings"
)

// PeerAdmissionStates lists every state, in the order of the docs.
var PeerAdmissionStates = []PeerAdmissionState{PeerAdmissionInForce, PeerAdmissionUnknown, PeerAdmissionNotWatched,
	PeerAdmissionPolicyMissing, PeerAdmissionBindingMissing, PeerAdmissionBindingOtherPolicy, PeerAdmissionNotDeny,
	PeerAdmissionFailOpen, PeerAdmissionNoPeerRule, PeerAdmissionNoPodRule, PeerAdmissionNoMeshRule,
	PeerAdmissionTypeWarnings}

// Metric names of the state, exported by wirekube-extauthz.
const (
	// MetricPeerAdmissionInForce is 1 while the state is in_force, else 0.
	MetricPeerAdmissionInForce = "wirekube_extauthz_peer_admission_in_force"
	// MetricPeerAdmissionState is 1 for the current state label, 0 for the
	// others.
	MetricPeerAdmissionState = "wirekube_extauthz_peer_admission_state"
)

// Default names of the shipped policy and binding (the chart's and
// manifests/components/peer-admission's).
const (
	DefaultPeerAdmissionPolicy  = "wirekube-relay-gateway-peer-keys"
	DefaultPeerAdmissionBinding = "wirekube-relay-gateway-peer-keys"
)
