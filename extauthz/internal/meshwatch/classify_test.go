package meshwatch

import (
	"net/url"
	"regexp"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wirekube/relay-ws/internal/contract"
)

const testExpectedRelayURL = "wss://relay.corp.test/relay"

func testExpected(t testing.TB) *url.URL {
	t.Helper()
	u, err := parseExpectedRelayURL(testExpectedRelayURL)
	must(t, err)
	return u
}

func external(transport, control, endpoint string) meshRelayFields {
	return meshRelayFields{Present: true, Mode: "auto", Provider: "external", External: true,
		ExtTransport: transport, ExtControl: control, ExtEndpoint: endpoint}
}

func managed(transport, control, status string) meshRelayFields {
	return meshRelayFields{Present: true, Mode: "always", Provider: "managed", MgdTransport: transport,
		MgdControl: control, StatusEndpoint: status}
}

// TestClassifyMeshRelay: the target of each shape of relay settings, the
// endpoint WireKube's agent would dial decided as the agent decides it.
func TestClassifyMeshRelay(t *testing.T) {
	tests := []struct {
		name     string
		f        meshRelayFields
		noExpect bool
		want     contract.MeshRelayTarget
		source   string
		host     bool
		path     bool
	}{
		{"managed wss to this gateway", managed("wss", "wss://relay.corp.test/relay", ""), false, "this_gateway", "controlEndpoint", true, true},
		{"host in upper case, explicit 443, trailing dot", managed("WSS", "wss://RELAY.corp.test.:443/relay", ""), false, "this_gateway", "controlEndpoint", true, true},
		{"external wss to this gateway", external("wss", "wss://relay.corp.test/relay", "203.0.113.1:3478"), false, "this_gateway", "controlEndpoint", true, true},
		{"managed wss to another host", managed("wss", "wss://relay.attacker.test/relay", ""), false, "other_wss", "controlEndpoint", false, true},
		{"wss to this host on another port", managed("wss", "wss://relay.corp.test:8443/relay", ""), false, "other_wss", "controlEndpoint", false, true},
		{"wss to this host on another path", managed("wss", "wss://relay.corp.test/other", ""), false, "other_wss", "controlEndpoint", true, false},
		{"wss to a host with this host as prefix", managed("wss", "wss://relay.corp.test.attacker.test/relay", ""), false, "other_wss", "controlEndpoint", false, true},
		{"wss without an expected URL", managed("wss", "wss://relay.attacker.test/relay", ""), true, "wss_unverified", "controlEndpoint", false, false},
		{"external ws to this gateway's host", external("ws", "ws://relay.corp.test/relay", ""), false, "ws_cleartext", "controlEndpoint", true, true},
		{"external ws to a node address", external("ws", "ws://10.0.0.9:8080/relay", ""), false, "ws_cleartext", "controlEndpoint", false, true},
		{"external ws without an expected URL", external(" WS ", "WS://10.0.0.9/relay", ""), true, "ws_cleartext", "controlEndpoint", false, false},
		{"managed tcp, nothing set: the control Service", managed("", "", ""), false, "raw_tcp", "service", false, false},
		{"managed tcp, status endpoint", managed("tcp", "", "203.0.113.5:3478"), false, "raw_tcp", "status.relayEndpoint", false, false},
		{"managed tcp, controlEndpoint first", managed("tcp", "198.51.100.7:3478", "203.0.113.5:3478"), false, "raw_tcp", "controlEndpoint", false, false},
		{"managed tcp, a ws URL in status", managed("tcp", "", "ws://203.0.113.5/relay"), false, "unusable", "status.relayEndpoint", false, false},
		{"external tcp, endpoint", external("", "", "203.0.113.1:3478"), false, "raw_tcp", "endpoint", false, false},
		{"external tcp, a wss controlEndpoint", external("tcp", "wss://relay.corp.test/relay", "203.0.113.1:3478"), false, "unusable", "controlEndpoint", false, false},
		{"external tcp, port out of range", external("tcp", "", "203.0.113.1:70000"), false, "unusable", "endpoint", false, false},
		{"managed ws: no such managed transport", managed("ws", "ws://10.0.0.9/relay", ""), false, "unusable", "", false, false},
		{"managed wss with a ws URL", managed("wss", "ws://10.0.0.9/relay", ""), false, "unusable", "controlEndpoint", false, false},
		{"external wss with no controlEndpoint", external("wss", "", "203.0.113.1:3478"), false, "unusable", "controlEndpoint", false, false},
		{"external without its block", meshRelayFields{Present: true, Provider: "external", ExtTransport: "ws"}, false, "unusable", "", false, false},
		{"unknown provider", meshRelayFields{Present: true, Provider: "other"}, false, "unusable", "", false, false},
		{"mode never", func() meshRelayFields { f := external("ws", "ws://10.0.0.9/relay", ""); f.Mode = "never"; return f }(), false, "relay_off", "", false, false},
		{"no relay", meshRelayFields{}, false, "relay_off", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expected := testExpected(t)
			if tt.noExpect {
				expected = nil
			}
			got := classifyMeshRelay(tt.f, expected)
			if got.Target != tt.want || got.Source != tt.source || got.HostMatch != tt.host || got.PathMatch != tt.path {
				t.Errorf("got target %s source %q host %v path %v, want %s %q %v %v", got.Target, got.Source,
					got.HostMatch, got.PathMatch, tt.want, tt.source, tt.host, tt.path)
			}
		})
	}
}

// TestMeshRelayHash: the hash is the first 8 hex digits of the SHA-256 of
// the endpoint the agent dials (printf %s URL | sha256sum).
func TestMeshRelayHash(t *testing.T) {
	got := classifyMeshRelay(managed("wss", "wss://relay.attacker.test/relay", ""), nil)
	// printf %s wss://relay.attacker.test/relay | sha256sum | cut -c1-8
	if got.Hash != "15b31577" {
		t.Errorf("hash %q, want 15b31577", got.Hash)
	}
}

// TestJudgeMeshObject reads the fields from WireKubeMesh objects as the
// API server returns them: nulls are absent, a wrong type is unusable.
func TestJudgeMeshObject(t *testing.T) {
	tests := []struct {
		name string
		obj  map[string]any
		want contract.MeshRelayTarget
	}{
		{"managed wss", map[string]any{"spec": map[string]any{"relay": map[string]any{"provider": "managed",
			"managed": map[string]any{"transport": "wss", "controlEndpoint": "wss://relay.corp.test/relay"}}}}, "this_gateway"},
		{"external ws", map[string]any{"spec": map[string]any{"relay": map[string]any{"provider": "external",
			"external": map[string]any{"transport": "ws", "controlEndpoint": "ws://10.0.0.9/relay"}}}}, "ws_cleartext"},
		{"status endpoint", map[string]any{"spec": map[string]any{"relay": map[string]any{"provider": "managed"}},
			"status": map[string]any{"relayEndpoint": "203.0.113.5:3478"}}, "raw_tcp"},
		{"relay null", map[string]any{"spec": map[string]any{"relay": nil}}, "relay_off"},
		{"external null", map[string]any{"spec": map[string]any{"relay": map[string]any{"provider": "external",
			"external": nil}}}, "unusable"},
		{"controlEndpoint a number", map[string]any{"spec": map[string]any{"relay": map[string]any{"provider": "managed",
			"managed": map[string]any{"transport": "wss", "controlEndpoint": int64(5)}}}}, "unusable"},
		{"relay a string", map[string]any{"spec": map[string]any{"relay": "ws://10.0.0.9/relay"}}, "unusable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := judgeMesh(&unstructured.Unstructured{Object: tt.obj}, testExpected(t)); got.Target != tt.want {
				t.Errorf("target %s, want %s", got.Target, tt.want)
			}
		})
	}
}

var (
	meshWords   = map[string][]string{"provider": {"external", "managed", "other"}, "transport": {"tcp", "ws", "wss", "other", ""}, "source": {"controlEndpoint", "endpoint", "status.relayEndpoint", "service", ""}}
	shortHashRe = regexp.MustCompile(`^([0-9a-f]{8})?$`)
)

// FuzzClassifyMeshRelay: whatever a node writes into the mesh, the
// judgement is one of the known targets and carries only fixed words and a
// short hash (what the log line and the Event print).
func FuzzClassifyMeshRelay(f *testing.F) {
	f.Add("managed", "wss", "wss://relay.corp.test/relay", "", "")
	f.Add("external", "ws", "ws://10.0.0.9:8080/relay", "203.0.113.1:3478", "")
	f.Add("managed", "tcp", "", "", "203.0.113.5:3478")
	f.Add("external", "WSS", "WSS://[::1]:x/%zz", " ", "\x00")
	f.Add("Managed", " wss ", "wss://relay.corp.test/relay", "", "")
	expected := testExpected(f)
	f.Fuzz(func(t *testing.T, provider, transport, control, endpoint, status string) {
		fields := meshRelayFields{Present: true, Provider: provider, External: true, ExtTransport: transport,
			ExtControl: control, ExtEndpoint: endpoint, MgdTransport: transport, MgdControl: control, StatusEndpoint: status}
		for _, exp := range []*url.URL{nil, expected} {
			r := classifyMeshRelay(fields, exp)
			if !slices.Contains(contract.MeshRelayTargets, r.Target) {
				t.Fatalf("target %q", r.Target)
			}
			for field, v := range map[string]string{"provider": r.Provider, "transport": r.Transport, "source": r.Source} {
				if !slices.Contains(meshWords[field], v) {
					t.Fatalf("%s %q is not a fixed word", field, v)
				}
			}
			if !shortHashRe.MatchString(r.Hash) {
				t.Fatalf("hash %q", r.Hash)
			}
			if exp == nil && r.Target == contract.MeshRelayThisGateway {
				t.Fatalf("this_gateway without an expected URL")
			}
		}
	})
}
