package probe

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
)

// extauthzMetrics is a piece of extauthz's /metrics as client_golang writes
// it, with the admission policy in state.
func extauthzMetrics(state string) string {
	var b strings.Builder
	b.WriteString("# HELP wirekube_extauthz_peer_admission_in_force 1 while ...\n# TYPE wirekube_extauthz_peer_admission_in_force gauge\n")
	b.WriteString("wirekube_extauthz_peer_admission_in_force 0\n# TYPE wirekube_extauthz_peer_admission_state gauge\n")
	for _, s := range []string{"binding_missing", "in_force", "policy_missing", "unknown"} {
		v := "0"
		if s == state {
			v = "1"
		}
		b.WriteString(`wirekube_extauthz_peer_admission_state{state="` + s + `"} ` + v + "\n")
	}
	return b.String()
}

// TestSessionsPeerAdmission: each gateway Pod's extauthz state is read
// from its /metrics through the Pod proxy and printed, in force or not;
// a Pod whose state cannot be read gets no line and the listing is whole.
func TestSessionsPeerAdmission(t *testing.T) {
	pods := `{"kind":"PodList","apiVersion":"v1","items":[` +
		`{"metadata":{"name":"gw-a"},"spec":{"containers":[{"name":"bridge","ports":[{"name":"bridge-metrics","containerPort":9102}]},` +
		`{"name":"extauthz","ports":[{"name":"authz-metrics","containerPort":9103}]}]},"status":{"phase":"Running","podIP":"10.0.0.1"}},` +
		`{"metadata":{"name":"gw-b"},"spec":{"containers":[{"name":"bridge","ports":[{"name":"bridge-metrics","containerPort":9102}]},` +
		`{"name":"extauthz","ports":[{"name":"authz-metrics","containerPort":9103}]}]},"status":{"phase":"Running","podIP":"10.0.0.2"}},` +
		`{"metadata":{"name":"gw-c"},"spec":{"containers":[{"name":"bridge","ports":[{"name":"bridge-metrics","containerPort":9102}]},` +
		`{"name":"extauthz","ports":[{"name":"authz-metrics","containerPort":9103}]}]},"status":{"phase":"Running","podIP":"10.0.0.3"}}]}`
	empty := `{"live":0,"sessions":[]}`
	f, kc := startFakeAPI(t, map[string]fakeAnswer{
		listURI: {200, pods},
		"/api/v1/namespaces/gw/pods/gw-a:9102/proxy/debug/sessions?limit=1000": {200, empty},
		"/api/v1/namespaces/gw/pods/gw-b:9102/proxy/debug/sessions?limit=1000": {200, empty},
		"/api/v1/namespaces/gw/pods/gw-c:9102/proxy/debug/sessions?limit=1000": {200, empty},
		"/api/v1/namespaces/gw/pods/gw-a:9103/proxy/metrics":                   {200, extauthzMetrics("in_force")},
		"/api/v1/namespaces/gw/pods/gw-b:9103/proxy/metrics":                   {200, extauthzMetrics("binding_missing")},
	})
	code, out, errOut := runSessions(t, "--kubeconfig", kc)
	want := "POD  PEER  IDENTITY  KEY  CLIENT ADDRESS  SINCE  EXPIRES  TO RELAY  TO CLIENT  REQUEST ID\n" +
		"gw-a: WireKubePeer admission policy in force\n" +
		"gw-b: WireKubePeer admission policy NOT in force (binding_missing): any agent may move another node's key (docs/revocation.md#admission)\n" +
		"0 sessions on 3 of 3 gateway Pods (namespace gw, selector app.kubernetes.io/name=wirekube-relay-gateway)\n"
	if code != ExitOK || out != want {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant exit 0, stdout:\n%s", code, errOut, out, want)
	}
	if !slices.Contains(f.seen, "/api/v1/namespaces/gw/pods/gw-c:9103/proxy/metrics") {
		t.Errorf("gw-c's extauthz was not asked: %q", f.seen)
	}
	_, out, _ = runSessions(t, "--kubeconfig", kc, "-o", "json")
	var rep SessionsReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Pods) != 3 {
		t.Fatalf("report %v: %s", err, out)
	}
	if got := []contract.PeerAdmissionState{rep.Pods[0].PeerAdmission, rep.Pods[1].PeerAdmission, rep.Pods[2].PeerAdmission}; !slices.Equal(got,
		[]contract.PeerAdmissionState{"in_force", "binding_missing", ""}) {
		t.Errorf("peerAdmission per Pod %q", got)
	}
}

func TestAdmissionState(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     contract.PeerAdmissionState
	}{
		{"in force", extauthzMetrics("in_force"), "in_force"},
		{"not in force", extauthzMetrics("policy_missing"), "policy_missing"},
		{"no sample at 1", extauthzMetrics("none"), ""},
		{"unknown state", `wirekube_extauthz_peer_admission_state{state="all_good"} 1` + "\n", ""},
		{"another metric", `wirekube_extauthz_peer_admission_state_x{state="in_force"} 1` + "\n", ""},
		{"value not 1", `wirekube_extauthz_peer_admission_state{state="in_force"} 0.5` + "\n", ""},
		{"no newline at the end", `wirekube_extauthz_peer_admission_state{state="in_force"} 1`, "in_force"},
		{"empty", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := admissionState([]byte(tt.in)); got != tt.want || ok != (tt.want != "") {
				t.Errorf("admissionState = %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}

// FuzzAdmissionState: whatever extauthz's /metrics holds, the state found
// is a known one and its sample line is in the input.
func FuzzAdmissionState(f *testing.F) {
	f.Add([]byte(extauthzMetrics("in_force")))
	f.Add([]byte(extauthzMetrics("unknown")))
	f.Add([]byte(`wirekube_extauthz_peer_admission_state{state="in_force"} 1e0`))
	f.Add([]byte("wirekube_extauthz_peer_admission_state{state=\"\x00\"} 1\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, ok := admissionState(in)
		if ok != (s != "") || (ok && !slices.Contains(contract.PeerAdmissionStates, s)) {
			t.Fatalf("admissionState = %q, %v", s, ok)
		}
		if ok && !bytes.Contains(in, []byte(`{state="`+string(s)+`"}`)) {
			t.Fatalf("state %q not in the input", s)
		}
	})
}
