package probe

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

const (
	onePodList = `{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"gw-a"},` +
		`"spec":{"containers":[{"name":"bridge","ports":[{"name":"bridge-metrics","containerPort":9102}]}]},"status":{"phase":"Running","podIP":"10.0.0.1"}}]}`
	peersURI  = "/apis/wirekube.io/v1alpha1/wirekubepeers?labelSelector=wirekube.io%2Fnode&limit=500"
	peersURI2 = "/apis/wirekube.io/v1alpha1/wirekubepeers?continue=page-2&labelSelector=wirekube.io%2Fnode&limit=500"
	// peersPage1 and peersPage2: node-a, node-c, node-b over two pages.
	peersPage1 = `{"kind":"WireKubePeerList","apiVersion":"wirekube.io/v1alpha1","metadata":{"continue":"page-2"},"items":[` +
		`{"metadata":{"name":"node-a","labels":{"wirekube.io/node":"node-a"}}},{"metadata":{"name":"node-c","labels":{"wirekube.io/node":"node-c"}}}]}`
	peersPage2 = `{"kind":"WireKubePeerList","apiVersion":"wirekube.io/v1alpha1","metadata":{},"items":[` +
		`{"metadata":{"name":"node-b","labels":{"wirekube.io/node":"node-b"}}}]}`
)

// TestSessionsEveryPeerNamesPeersWithoutSession: the agent peers are
// node-a, node-c, node-b (two pages); only node-a holds a session (the
// other session's peer is not an agent peer): node-b and node-c are named,
// sorted, and the exit is 11; the peers are listed after the sessions.
func TestSessionsEveryPeerNamesPeersWithoutSession(t *testing.T) {
	foreign := strings.Replace(sessionA, `"peer":"node-a"`, `"peer":"laptop-1"`, 1)
	f, kc := startFakeAPI(t, map[string]fakeAnswer{
		listURI:   {200, onePodList},
		proxyA:    {200, `{"live":2,"sessions":[` + sessionA + `,` + foreign + `]}`},
		peersURI:  {200, peersPage1},
		peersURI2: {200, peersPage2},
	})
	code, out, errOut := runSessions(t, "--kubeconfig", kc, "--every-peer")
	wantTail := "2 sessions on 1 of 1 gateway Pods (namespace gw, selector app.kubernetes.io/name=wirekube-relay-gateway)\n" +
		"node-b: no live session through the gateway (agent still on tcp, or off the relay)\n" +
		"node-c: no live session through the gateway (agent still on tcp, or off the relay)\n" +
		"1 of 3 agent WireKubePeers (label wirekube.io/node) hold a live session\n"
	if code != ExitPeersWithoutSession || !strings.HasSuffix(out, wantTail) || !strings.Contains(errOut, "2 of 3 agent WireKubePeers hold no live session") {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant exit 11 and stdout ending:\n%s", code, errOut, out, wantTail)
	}
	if want := []string{listURI, proxyA, peersURI, peersURI2}; !slices.Equal(f.seen, want) {
		t.Fatalf("requests %q, want %q", f.seen, want)
	}
}

// TestSessionsEveryPeerAllCovered: every agent peer holds a session: exit
// 0, and the JSON report carries the coverage.
func TestSessionsEveryPeerAllCovered(t *testing.T) {
	b := strings.Replace(sessionA, `"peer":"node-a"`, `"peer":"node-b"`, 1)
	c := strings.Replace(sessionA, `"peer":"node-a"`, `"peer":"node-c"`, 1)
	_, kc := startFakeAPI(t, map[string]fakeAnswer{
		listURI:   {200, onePodList},
		proxyA:    {200, `{"live":3,"sessions":[` + sessionA + `,` + b + `,` + c + `]}`},
		peersURI:  {200, peersPage1},
		peersURI2: {200, peersPage2},
	})
	code, out, errOut := runSessions(t, "--kubeconfig", kc, "--every-peer", "-o", "json")
	var rep SessionsReport
	if code != ExitOK || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	if rep.EveryPeer == nil || rep.EveryPeer.AgentPeers != 3 || rep.EveryPeer.WithoutSession == nil || len(rep.EveryPeer.WithoutSession) != 0 {
		t.Fatalf("every_peer %+v, want 3 agent peers and an empty without_session", rep.EveryPeer)
	}
}

// TestSessionsEveryPeerRefusals: a Pod not listed is exit 7 even with a
// peer missing (the evidence is incomplete); a refused peer listing names
// the cluster-wide permission; the CRD missing says so; --peer conflicts.
func TestSessionsEveryPeerRefusals(t *testing.T) {
	forbidden := `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"wirekubepeers.wirekube.io is forbidden"}`
	_, kcPodDown := startFakeAPI(t, map[string]fakeAnswer{listURI: {200, onePodList}, proxyA: {503, "no endpoints"},
		peersURI: {200, peersPage2}})
	_, kcForbidden := startFakeAPI(t, map[string]fakeAnswer{listURI: {200, onePodList}, proxyA: {200, `{"live":0,"sessions":[]}`},
		peersURI: {403, forbidden}})
	_, kcNoCRD := startFakeAPI(t, map[string]fakeAnswer{listURI: {200, onePodList}, proxyA: {200, `{"live":0,"sessions":[]}`}})
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"a Pod not listed", []string{"--kubeconfig", kcPodDown, "--every-peer"}, ExitUnavailable, "0 of 1 gateway Pods listed"},
		{"peers forbidden", []string{"--kubeconfig", kcForbidden, "--every-peer"}, ExitDenied403, "kubectl auth can-i list wirekubepeers.wirekube.io"},
		{"no CRD", []string{"--kubeconfig", kcNoCRD, "--every-peer"}, ExitRejected, "wirekubepeers.wirekube.io is not installed"},
		{"with --peer", []string{"--every-peer", "--peer", "node-a"}, ExitUsage, "--every-peer: compares every peer's sessions; drop --peer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runSessions(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Fatalf("exit %d, stderr %q (stdout %q); want exit %d and %q", code, errOut, out, tc.code, tc.msg)
			}
		})
	}
}
