package manifests

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/wirekube/relay-ws/tools/probe"
)

// TestChartHelmTestLeavesNoCredential: `helm test` creates one object, the
// probe Pod: no ServiceAccount (no per-peer identity for a node), no
// Secret. The Pod runs on the peer's node as the agent's ServiceAccount,
// mounts no API token, and its one token is projected for the relay
// audience for the minimum 600 s and bound to the Pod, which Helm deletes
// before the next run (kept after the test for helm test --logs: its token
// serves only the relay audience, where the gateway refuses a finished Pod,
// pod_terminated).
func TestChartHelmTestLeavesNoCredential(t *testing.T) {
	r := renderChart(t, chartValueSets["helm-test"]...)
	var hooks []string
	for _, o := range r.objs {
		if strings.Contains(o.GetAnnotations()["helm.sh/hook"], "test") {
			hooks = append(hooks, o.GetKind()+"/"+o.GetName())
		}
	}
	mustf(t, slices.Equal(hooks, []string{"Pod/wirekube-relay-gateway-test"}), "helm test creates %v, want only the probe Pod", hooks)
	pod := into[corev1.Pod](t, r.one(t, "Pod", "wirekube-relay-gateway-test"))
	policy := strings.Split(pod.Annotations["helm.sh/hook-delete-policy"], ",")
	mustf(t, slices.Contains(policy, "before-hook-creation"),
		"hook-delete-policy %q, want before-hook-creation", pod.Annotations["helm.sh/hook-delete-policy"])
	mustf(t, pod.Namespace == "wirekube-system" && pod.Spec.ServiceAccountName == "wirekube-agent",
		"runs as %s/%s, want the agent's wirekube-system/wirekube-agent", pod.Namespace, pod.Spec.ServiceAccountName)
	mustf(t, pod.Spec.NodeName == "node-a", "nodeName %q, want the peer's node node-a", pod.Spec.NodeName)
	mustf(t, pod.Spec.AutomountServiceAccountToken != nil && !*pod.Spec.AutomountServiceAccountToken, "an API token is mounted")
	for _, v := range pod.Spec.Volumes {
		mustf(t, v.Secret == nil, "volume %s is a Secret", v.Name)
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			tok := src.ServiceAccountToken
			if tok == nil {
				continue
			}
			mustf(t, tok.Audience == "wirekube-relay" && tok.ExpirationSeconds != nil && *tok.ExpirationSeconds == 600,
				"projected token audience %q, %v s; want wirekube-relay, 600", tok.Audience, tok.ExpirationSeconds)
		}
	}
}

// TestChartHelmTestPodJoinsNoSelector: the helm test Pod matches no
// selector of the gateway (Deployment, Services, PDB, PodMonitor,
// NetworkPolicies) nor the default selector of `wirekube-relay-probe
// sessions`: a test Pod left behind after a failure would otherwise join
// the gateway Service and the PDB, and make `sessions` list a Pod without
// a bridge.
func TestChartHelmTestPodJoinsNoSelector(t *testing.T) {
	r := renderChart(t, "--set", "front=none,helmTest.peer=node-a,helmTest.publicKey="+testPublicKey+
		",monitoring.podMonitor.enabled=true,monitoring.serviceMonitor.enabled=true,networkPolicy.mode=enforce,"+signingSecretSet)
	pod := into[corev1.Pod](t, r.one(t, "Pod", "wirekube-relay-gateway-test"))
	set := labels.Set(pod.Labels)
	sels := selectorsOf(t, r)
	mustf(t, len(sels) >= 6, "found %d selectors, want the Deployment's, two Services', the PDB's, the PodMonitor's, the metrics Service's and the policies'", len(sels))
	for name, sel := range sels {
		mustf(t, !sel.Matches(set), "%s selects the helm test Pod (labels %v)", name, pod.Labels)
	}
	probeSel, err := labels.Parse(probe.DefaultGatewaySelector)
	if err != nil {
		t.Fatal(err)
	}
	mustf(t, !probeSel.Matches(set), "wirekube-relay-probe sessions' default selector %q selects the helm test Pod", probe.DefaultGatewaySelector)
}
