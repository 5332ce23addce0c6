//go:build e2e

// Package e2e is the end-to-end suite: a real kube-apiserver and etcd, the
// repository's binaries, a real nginx and the gRPC front (real Envoy when one
// is on PATH, else the stand-in), over real sockets. Run it with
// `go test -tags e2e -count=1 ./e2e/` (see docs/e2e.md).
package e2e

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wirekube/relay-ws/internal/test/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testutil.ClientGoLeaks()...) }

// TestE2E runs every scenario through every front, then the faults (which
// disturb the shared stack) and finally the log scan, in this order.
func TestE2E(t *testing.T) {
	start := time.Now()
	e := newEnv(t)
	t.Logf("stack up in %s", time.Since(start).Round(time.Millisecond))
	t.Run("harness", e.testHarness)
	t.Run("manifests_dry_run", e.testManifests)
	t.Run("extauthz_rbac_from_manifests", e.testExtauthzRBAC)
	t.Run("chart_dry_run", e.testChartDryRun)
	t.Run("full_replica_eviction", e.testFullReplicaEviction)
	t.Run("full_replica_bounce", e.testFullReplicaBounce) // a Pod of its own: the stack's processes untouched
	t.Run("alongside_wirekube_chart", e.testAlongsideChart)
	for _, f := range e.fronts {
		t.Run(f.name, func(t *testing.T) {
			sentinels := e.newSentinels(t, f)
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					sc.run(e, t, f)
					sentinels.check(t)
				})
			}
		})
	}
	t.Run("peer_events", e.testPeerEvents)
	t.Run("peer_admission", e.testPeerAdmission)
	t.Run("agent_pod_admission", e.testAgentPodAdmission)
	t.Run("agent_mesh_admission", e.testAgentMeshAdmission)
	t.Run("mesh_watch", e.testMeshWatch)
	t.Run("key_moved", e.testKeyMoved)
	t.Run("key_gap", e.testKeyGap)
	t.Run("stranger_events", e.testStrangerEvents)
	t.Run("ws_clients", e.testWSClients)
	t.Run("front_matrix", e.testFrontMatrix)
	t.Run("client_address_proxy_protocol", e.testProxyProtocol)
	t.Run("one_address_flood", e.testOneAddressFlood)
	t.Run("forged_headers_straight_to_bridge", e.testForgedToBridge)
	t.Run("replay_cache_one_peer_flooding", e.testReplayFlood)
	t.Run("operator_signals_metrics_exist", e.testOperatorSignals)
	t.Run("dropped_signing_key_refused", e.testDroppedSigningKey) // restarts extauthz: after the scenario reading its counters
	t.Run("revocation_scale", e.testRevocationScale)
	t.Run("binding_across_replicas", e.testBindingAcrossReplicas)
	t.Run("forward_proxy", e.testForwardProxy)
	t.Run("faults", e.testFaults)
	t.Run("recovery", e.testRecovery)
	t.Run("leaving", e.testLeaving) // rewrites the RBAC extauthz runs with, then restores it
	t.Run("8_logs_contain_no_token", e.testLogs)
	t.Logf("suite done in %s", time.Since(start).Round(time.Millisecond))
}

// scenario is one named subtest run through each front.
type scenario struct {
	name string
	run  func(e *env, t *testing.T, f front)
}

var scenarios = []scenario{
	{"1_pod_bound_agents_exchange_data", (*env).testPodBoundExchange},
	{"1_peer_service_account_exchange_data", (*env).testPeerSAExchange},
	{"1_node_bound_agent_exchange_data", (*env).testNodeBoundExchange},
	{"2_denied_before_upgrade", (*env).testDeniedBeforeUpgrade},
	{"3_identity", (*env).testIdentity},
	{"4_register_and_frames", (*env).testRegister},
	{"5_sessions", (*env).testSessions},
	{"6_spoofed_identity_headers", (*env).testSpoofing},
	{"7_revocation", (*env).testRevocation},
	{"9_refused_by_local_verification", (*env).testLocalVerification},
	{"9_token_anywhere_else_not_logged", (*env).testTokenPlaces},
	{"10_binding_rules", (*env).testBindingRules},
	{"11_refusals_traceable", (*env).testTraceable},
	{"12_sessions_listing", (*env).testSessionListing},
	{"13_client_address_from_the_front", (*env).testClientAddress},
}
