package manifests

import (
	"strings"
	"testing"
)

// TestChartNotesForAReleaseOutsideTheAgents: with the release in its own
// namespace, NOTES sends every command about the agents (their Pods, their
// ServiceAccount's tokens, the DaemonSet, the helm test Pod's log) to the
// agents' namespace, and does not offer helm test --logs, which Helm reads
// from the release namespace (helm v3.22.0 pkg/action/release_testing.go,
// GetPodLogs); in the agents' namespace it does.
func TestChartNotesForAReleaseOutsideTheAgents(t *testing.T) {
	helmTest := []string{"--set", "publicHost=relay.corp.internal,helmTest.peer=node-a,helmTest.publicKey=" + testPublicKey}
	apart := renderNotesIn(t, "relay-gateway", helmTest...)
	for _, want := range []string{
		"helm test wirekube-relay-gateway -n relay-gateway ",
		"kubectl -n wirekube-system logs wirekube-relay-gateway-test",
		"AGENT=$(kubectl -n wirekube-system get pod -l app.kubernetes.io/name=wirekube-agent",
		"kubectl -n wirekube-system create token wirekube-agent",
		"kubectl -n wirekube-system debug $AGENT",
		"kubectl -n wirekube-system rollout restart daemonset/wirekube-agent",
	} {
		mustf(t, strings.Contains(apart, want), "NOTES of a release in relay-gateway lack %q", want)
	}
	mustf(t, !strings.Contains(apart, "--logs"), "NOTES of a release in relay-gateway offer helm test --logs")
	mustf(t, !strings.Contains(apart, "kubectl -n relay-gateway get pod -l app.kubernetes.io/name=wirekube-agent"),
		"NOTES look for the agent Pods in the release namespace")
	beside := renderNotesIn(t, "wirekube-system", helmTest...)
	mustf(t, strings.Contains(beside, "helm test wirekube-relay-gateway -n wirekube-system --logs"), "NOTES beside the agents lack helm test --logs")
}

// TestChartTestPodKeptForItsLog: the helm test Pod is deleted before the
// next test run only, never right after it passed: helm test --logs reads
// it after the test, and fails on a deleted Pod.
func TestChartTestPodKeptForItsLog(t *testing.T) {
	r := renderChart(t, "--set", "helmTest.peer=node-a,helmTest.publicKey="+testPublicKey)
	pod := r.one(t, "Pod", "wirekube-relay-gateway-test")
	policy := pod.GetAnnotations()["helm.sh/hook-delete-policy"]
	mustf(t, policy == "before-hook-creation", "hook-delete-policy %q, want before-hook-creation", policy)
}
