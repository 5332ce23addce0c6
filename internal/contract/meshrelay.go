package contract

// Where the WireKubeMesh sends WireKube's agents (docs/extauthz.md#mesh-watch),
// as wirekube-extauthz judges it: the `target` label of
// MetricMeshRelayTargets and MetricMeshRelayChanges, the `target` field of
// extauthz's log line and the reason of its Event on the WireKubeMesh, and
// what wirekube-relay-probe sessions prints per gateway Pod.

// MeshRelayTarget classifies the relay endpoint a WireKubeMesh makes the
// agents dial, following WireKube's own choice of endpoint (provider,
// transport, controlEndpoint, status.relayEndpoint).
type MeshRelayTarget string

const (
	// MeshRelayThisGateway: wss:// to the host, port and path of
	// --expected-relay-url.
	MeshRelayThisGateway MeshRelayTarget = "this_gateway"
	// MeshRelayWSCleartext: ws:// — every agent sends its relay token
	// unencrypted to that address, whatever host it names.
	MeshRelayWSCleartext MeshRelayTarget = "ws_cleartext"
	// MeshRelayOtherWSS: wss:// to another host, port or path than
	// --expected-relay-url: every agent sends its relay token there.
	MeshRelayOtherWSS MeshRelayTarget = "other_wss"
	// MeshRelayWSSUnverified: wss://, and no --expected-relay-url to compare
	// it with.
	MeshRelayWSSUnverified MeshRelayTarget = "wss_unverified"
	// MeshRelayRawTCP: transport tcp, the raw relay: no token is sent (and
	// this gateway is not on the path).
	MeshRelayRawTCP MeshRelayTarget = "raw_tcp"
	// MeshRelayOff: no spec.relay, or relay mode never: the agents dial no
	// relay.
	MeshRelayOff MeshRelayTarget = "relay_off"
	// MeshRelayUnusable: settings WireKube's agent refuses (unknown provider
	// or transport, a URL of the wrong scheme, no endpoint): it dials
	// nothing.
	MeshRelayUnusable MeshRelayTarget = "unusable"
)

// MeshRelayTargets lists every target, in the order of the docs.
var MeshRelayTargets = []MeshRelayTarget{MeshRelayThisGateway, MeshRelayWSCleartext, MeshRelayOtherWSS,
	MeshRelayWSSUnverified, MeshRelayRawTCP, MeshRelayOff, MeshRelayUnusable}

// Exposes reports whether agents following the mesh send their relay
// token somewhere other than this gateway, or in clear.
func (t MeshRelayTarget) Exposes() bool {
	return t == MeshRelayWSCleartext || t == MeshRelayOtherWSS
}

// Metric names of the mesh watch, exported by wirekube-extauthz.
const (
	// MetricMeshRelayTargets is the number of WireKubeMeshes per target.
	MetricMeshRelayTargets = "wirekube_extauthz_mesh_relay_targets"
	// MetricMeshRelayChanges counts each WireKubeMesh seen pointing at a
	// target: at first sight, and at every change of target or endpoint.
	MetricMeshRelayChanges = "wirekube_extauthz_mesh_relay_changes_total"
	// MetricMeshRelayWatchSynced is 1 once the WireKubeMeshes have been
	// listed, 0 before (and for good where extauthz may not list them).
	MetricMeshRelayWatchSynced = "wirekube_extauthz_mesh_relay_watch_synced"
)
