package probe

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
)

// meshMetrics is the mesh watch's part of extauthz's /metrics as
// client_golang writes it: every target, n meshes for those in counts.
func meshMetrics(synced string, counts map[string]string) string {
	var b strings.Builder
	b.WriteString("# TYPE wirekube_extauthz_mesh_relay_targets gauge\n")
	for _, tg := range []string{"other_wss", "raw_tcp", "relay_off", "this_gateway", "unusable", "ws_cleartext", "wss_unverified"} {
		n := counts[tg]
		if n == "" {
			n = "0"
		}
		b.WriteString(`wirekube_extauthz_mesh_relay_targets{target="` + tg + `"} ` + n + "\n")
	}
	b.WriteString("# TYPE wirekube_extauthz_mesh_relay_watch_synced gauge\nwirekube_extauthz_mesh_relay_watch_synced " + synced + "\n")
	return b.String()
}

// TestSessionsMeshRelay: each gateway Pod's extauthz view of the
// WireKubeMeshes is printed, with what a mesh that sends tokens elsewhere
// means; a Pod without the metrics gets no line.
func TestSessionsMeshRelay(t *testing.T) {
	pod := func(name, ip string) string {
		return `{"metadata":{"name":"` + name + `"},"spec":{"containers":[{"name":"bridge","ports":[{"name":"bridge-metrics","containerPort":9102}]},` +
			`{"name":"extauthz","ports":[{"name":"authz-metrics","containerPort":9103}]}]},"status":{"phase":"Running","podIP":"` + ip + `"}}`
	}
	pods := `{"kind":"PodList","apiVersion":"v1","items":[` + pod("gw-a", "10.0.0.1") + "," + pod("gw-b", "10.0.0.2") + "," +
		pod("gw-c", "10.0.0.3") + "," + pod("gw-d", "10.0.0.4") + `]}`
	empty := `{"live":0,"sessions":[]}`
	answers := map[string]fakeAnswer{
		listURI: {200, pods},
		"/api/v1/namespaces/gw/pods/gw-a:9103/proxy/metrics": {200, meshMetrics("1", map[string]string{"ws_cleartext": "1", "this_gateway": "1"})},
		"/api/v1/namespaces/gw/pods/gw-b:9103/proxy/metrics": {200, meshMetrics("1", map[string]string{"this_gateway": "1"})},
		"/api/v1/namespaces/gw/pods/gw-c:9103/proxy/metrics": {200, meshMetrics("0", nil)},
	}
	for _, p := range []string{"gw-a", "gw-b", "gw-c", "gw-d"} {
		answers["/api/v1/namespaces/gw/pods/"+p+":9102/proxy/debug/sessions?limit=1000"] = fakeAnswer{200, empty}
	}
	_, kc := startFakeAPI(t, answers)
	code, out, errOut := runSessions(t, "--kubeconfig", kc)
	want := "POD  PEER  IDENTITY  KEY  CLIENT ADDRESS  SINCE  EXPIRES  TO RELAY  TO CLIENT  REQUEST ID\n" +
		"gw-a: WireKubeMesh relay: this_gateway=1 ws_cleartext=1: agents send their relay tokens elsewhere than this gateway or in clear (docs/extauthz.md#mesh-watch)\n" +
		"gw-b: WireKubeMesh relay: this_gateway=1\n" +
		"gw-c: WireKubeMesh relay: not read by extauthz (RBAC get,list,watch on wirekubemeshes? docs/extauthz.md#mesh-watch)\n" +
		"0 sessions on 4 of 4 gateway Pods (namespace gw, selector app.kubernetes.io/name=wirekube-relay-gateway)\n"
	if code != ExitOK || out != want {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant exit 0, stdout:\n%s", code, errOut, out, want)
	}
	_, out, _ = runSessions(t, "--kubeconfig", kc, "-o", "json")
	var rep SessionsReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Pods) != 4 {
		t.Fatalf("report %v: %s", err, out)
	}
	if v := rep.Pods[0].MeshRelay; v == nil || !v.Synced || len(v.Targets) != 2 || v.Targets["ws_cleartext"] != 1 || v.Targets["this_gateway"] != 1 {
		t.Errorf("gw-a meshRelay %+v, want synced, ws_cleartext 1, this_gateway 1", v)
	}
	if rep.Pods[3].MeshRelay != nil {
		t.Errorf("gw-d meshRelay %+v, want none", rep.Pods[3].MeshRelay)
	}
}

func TestMeshRelayTargets(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     *MeshRelayView
	}{
		{"one ws mesh", meshMetrics("1", map[string]string{"ws_cleartext": "1"}),
			&MeshRelayView{Synced: true, Targets: map[contract.MeshRelayTarget]int{"ws_cleartext": 1}}},
		{"not synced", meshMetrics("0", nil), &MeshRelayView{Targets: map[contract.MeshRelayTarget]int{}}},
		{"unknown target only", `wirekube_extauthz_mesh_relay_targets{target="evil.test"} 1` + "\n", nil},
		{"not a count", `wirekube_extauthz_mesh_relay_targets{target="other_wss"} 1.5` + "\n", nil},
		{"another metric", `wirekube_extauthz_mesh_relay_targets_x{target="other_wss"} 1` + "\n", nil},
		{"empty", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := meshRelayTargets([]byte(tt.in))
			if (got == nil) != (tt.want == nil) || (got != nil && (got.Synced != tt.want.Synced || len(got.Targets) != len(tt.want.Targets))) {
				t.Fatalf("meshRelayTargets = %+v, want %+v", got, tt.want)
			}
			for k, n := range tt.want.targets() {
				if got.Targets[k] != n {
					t.Errorf("%s = %d, want %d", k, got.Targets[k], n)
				}
			}
		})
	}
}

func (v *MeshRelayView) targets() map[contract.MeshRelayTarget]int {
	if v == nil {
		return nil
	}
	return v.Targets
}

// FuzzMeshRelayTargets: whatever extauthz's /metrics holds, only known
// targets with positive counts come out, each from a line of the input.
func FuzzMeshRelayTargets(f *testing.F) {
	f.Add([]byte(meshMetrics("1", map[string]string{"ws_cleartext": "2"})))
	f.Add([]byte(meshMetrics("0", nil)))
	f.Add([]byte("wirekube_extauthz_mesh_relay_targets{target=\"\x00\"} -1\n"))
	f.Add([]byte(`wirekube_extauthz_mesh_relay_targets{target="ws_cleartext"} -1`))
	f.Fuzz(func(t *testing.T, in []byte) {
		v := meshRelayTargets(in)
		if v == nil {
			return
		}
		for k, n := range v.Targets {
			if !slices.Contains(contract.MeshRelayTargets, k) || n < 1 {
				t.Fatalf("target %q count %d", k, n)
			}
			if !bytes.Contains(in, []byte(`{target="`+string(k)+`"}`)) {
				t.Fatalf("target %q not in the input", k)
			}
		}
	})
}
