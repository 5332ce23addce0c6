package probe

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
)

// fakeAPIServer answers the two API calls of the sessions subcommand in
// the shapes of the Kubernetes API reference: the Pod list
// (GET /api/v1/namespaces/{ns}/pods?labelSelector=) and the Pod proxy
// (GET /api/v1/namespaces/{ns}/pods/{name}:{port}/proxy/{path}). Its
// answers are written down per request URI.
type fakeAPIServer struct {
	answers map[string]fakeAnswer
	mu      sync.Mutex
	seen    []string
	// limited[uri] is how many times uri is answered first as the bridge
	// answers a listing beyond its bounds (429 sessions_list_busy,
	// Retry-After: 1), passed through by the Pod proxy.
	limited map[string]int
}

type fakeAnswer struct {
	status int
	body   string
}

func (f *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen = append(f.seen, r.URL.RequestURI())
	f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer kubeconfig-token-123" {
		http.Error(w, "no credentials", http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	limited := f.limited[r.URL.RequestURI()] > 0
	if limited {
		f.limited[r.URL.RequestURI()]--
	}
	f.mu.Unlock()
	if limited {
		w.Header().Set("Retry-After", "1")
		w.Header().Set(contract.HeaderDenyReason, string(contract.ReasonSessionsListBusy))
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintln(w, contract.ReasonSessionsListBusy)
		return
	}
	a, ok := f.answers[r.URL.RequestURI()]
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	fmt.Fprint(w, a.body)
}

const podList = `{"kind":"PodList","apiVersion":"v1","items":[
 {"metadata":{"name":"gw-a","namespace":"gw"},"spec":{"containers":[{"name":"bridge","ports":[{"name":"bridge-metrics","containerPort":9102}]}]},
  "status":{"phase":"Running","podIP":"10.0.0.1"}},
 {"metadata":{"name":"gw-b","namespace":"gw"},"spec":{"containers":[{"name":"envoy","ports":[{"name":"https","containerPort":8443}]},{"name":"bridge","ports":[{"name":"bridge-metrics","containerPort":19102}]}]},
  "status":{"phase":"Running","podIP":"10.0.0.2"}},
 {"metadata":{"name":"gw-c","namespace":"gw"},"spec":{"containers":[{"name":"bridge"}]},"status":{"phase":"Pending"}}]}`

const (
	listURI  = "/api/v1/namespaces/gw/pods?labelSelector=app.kubernetes.io%2Fname%3Dwirekube-relay-gateway"
	proxyA   = "/api/v1/namespaces/gw/pods/gw-a:9102/proxy/debug/sessions?limit=1000"
	proxyA2  = "/api/v1/namespaces/gw/pods/gw-a:9102/proxy/debug/sessions?after=7&limit=1000"
	proxyB   = "/api/v1/namespaces/gw/pods/gw-b:19102/proxy/debug/sessions?limit=1000"
	sessionA = `{"id":"7","peer":"node-a","identity":"system:serviceaccount:wirekube-system:node-a","key":"ae216c2e",` +
		`"client_address":"203.0.113.7","since":"2026-12-02T01:00:00Z","expires":"2026-12-02T02:00:00Z","request_id":"req-1",` +
		`"bytes_to_relay":76,"bytes_to_client":39,"frames_to_relay":2,"frames_to_client":1}`
	sessionA2 = `{"id":"9","peer":"node-b\u001b[31m","identity":"system:serviceaccount:wirekube-system:node-b","key":"6f103f3d",` +
		`"since":"2026-12-02T01:05:00Z","expires":"2026-12-02T02:05:00Z",` +
		`"bytes_to_relay":37,"bytes_to_client":0,"frames_to_relay":1,"frames_to_client":0}`
)

func startFakeAPI(t *testing.T, answers map[string]fakeAnswer) (*fakeAPIServer, string) {
	t.Helper()
	f := &fakeAPIServer{answers: answers}
	// TLS: client-go sends a kubeconfig's credentials only over TLS.
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: u, user: {token: kubeconfig-token-123}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: gw}}]
current-context: c
`, srv.URL, base64.StdEncoding.EncodeToString(ca))
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return f, kc
}

func runSessions(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut strings.Builder
	err := Command(context.Background(), append([]string{"sessions"}, args...), &out, &errOut)
	if err != nil {
		errOut.WriteString(err.Error())
	}
	return ExitCode(err), out.String(), errOut.String()
}

// TestSessionsGathersEveryPod: two pages from gw-a, 404 from gw-b (the
// listing off), gw-c not running: every session of gw-a in the text
// table, the two failures named, exit 7; the port name resolved per Pod.
func TestSessionsGathersEveryPod(t *testing.T) {
	f, kc := startFakeAPI(t, map[string]fakeAnswer{
		listURI: {200, podList},
		proxyA:  {200, `{"live":2,"sessions":[` + sessionA + `],"next":"7"}`},
		proxyA2: {200, `{"live":2,"sessions":[` + sessionA2 + `]}`},
		proxyB:  {404, "404 page not found\n"},
	})
	code, out, errOut := runSessions(t, "--kubeconfig", kc)
	want := `POD   PEER              IDENTITY                                      KEY       CLIENT ADDRESS  SINCE                 EXPIRES               TO RELAY   TO CLIENT  REQUEST ID
gw-a  node-a            system:serviceaccount:wirekube-system:node-a  ae216c2e  203.0.113.7     2026-12-02T01:00:00Z  2026-12-02T02:00:00Z  76 B 2 fr  39 B 1 fr  req-1
gw-a  "node-b\x1b[31m"  system:serviceaccount:wirekube-system:node-b  6f103f3d  -               2026-12-02T01:05:00Z  2026-12-02T02:05:00Z  37 B 1 fr  0 B 0 fr   -
gw-b: not listed: 404: the bridge runs without --debug-sessions (docs/bridge.md#who-is-connected), or the Pod is gone
gw-c: not listed: not running (phase Pending)
2 sessions on 1 of 3 gateway Pods (namespace gw, selector app.kubernetes.io/name=wirekube-relay-gateway)
`
	if code != ExitUnavailable || out != want {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant exit 7, stdout:\n%s", code, errOut, out, want)
	}
	if want := []string{listURI, proxyA, proxyA2, proxyB}; !slices.Equal(f.seen, want) {
		t.Fatalf("requests %q, want %q", f.seen, want)
	}
	if strings.Contains(out+errOut, "kubeconfig-token-123") {
		t.Fatal("the kubeconfig's token was printed")
	}
}

// TestSessionsJSONAndPeer: --peer goes to the bridge, -o json is the
// report; every Pod listed is exit 0.
func TestSessionsJSONAndPeer(t *testing.T) {
	onePod := `{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"gw-a"},` +
		`"spec":{"containers":[{"name":"bridge","ports":[{"name":"bridge-metrics","containerPort":9102}]}]},"status":{"phase":"Running","podIP":"10.0.0.1"}}]}`
	peerURI := "/api/v1/namespaces/gw/pods/gw-a:9102/proxy/debug/sessions?limit=1000&peer=node-a"
	_, kc := startFakeAPI(t, map[string]fakeAnswer{
		listURI: {200, onePod},
		peerURI: {200, `{"live":2,"sessions":[` + sessionA + `]}`},
	})
	code, out, errOut := runSessions(t, "--kubeconfig", kc, "--peer", "node-a", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	var rep SessionsReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if rep.Namespace != "gw" || rep.Sessions != 1 || len(rep.Pods) != 1 || rep.Pods[0].Live != 2 ||
		len(rep.Pods[0].Sessions) != 1 || rep.Pods[0].Sessions[0].Key != "ae216c2e" || rep.Pods[0].Sessions[0].BytesToClient != 39 {
		t.Fatalf("report %+v", rep)
	}
}

// TestSessionsExitCodes: RBAC refusals name the permission; usage errors
// name the flag.
func TestSessionsExitCodes(t *testing.T) {
	forbidden := `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"pods \"gw-a:9102\" is forbidden"}`
	_, kcProxy := startFakeAPI(t, map[string]fakeAnswer{listURI: {200, podList}, proxyA: {403, forbidden}})
	_, kcList := startFakeAPI(t, map[string]fakeAnswer{listURI: {403, forbidden}})
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"pods/proxy forbidden", []string{"--kubeconfig", kcProxy}, ExitDenied403, "may not get pods/proxy in namespace gw (check with: kubectl auth can-i get pods/proxy -n gw)"},
		{"pods forbidden", []string{"--kubeconfig", kcList}, ExitDenied403, "may not list pods in namespace gw"},
		{"bad output", []string{"-o", "wide"}, ExitUsage, "-o/--output: want text, json or yaml"},
		{"bad port", []string{"--port", "Bridge_Metrics"}, ExitUsage, `--port: want a container port name or number, got "Bridge_Metrics"`},
		{"bad peer", []string{"--peer", "a b"}, ExitUsage, `--peer: want a WireKubePeer name`},
		{"empty selector", []string{"--selector", ""}, ExitUsage, "--selector: must not be empty"},
		{"argument", []string{"node-a"}, ExitUsage, `unexpected argument "node-a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runSessions(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Fatalf("exit %d, stderr %q (stdout %q); want exit %d and %q", code, errOut, out, tc.code, tc.msg)
			}
		})
	}
}

// TestSessionsHelp: the probe's -h names the subcommand, whose -h says what
// it does; neither is an error.
func TestSessionsHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-h"}, "wirekube-relay-probe sessions [flags]  (who is connected"},
		{[]string{"sessions", "-h"}, "Lists the live sessions of every gateway Pod through the API server's Pod proxy"},
	} {
		var errOut strings.Builder
		err := Command(context.Background(), tc.args, io.Discard, &errOut)
		if err != nil || !strings.Contains(errOut.String(), tc.want) || !strings.Contains(errOut.String(), "  -") {
			t.Errorf("%q: %v, stderr:\n%s\nwant %q and the flags", tc.args, err, errOut.String(), tc.want)
		}
	}
}

// TestSessionsRetriesABusyListing: the bridge answers a page 429 with
// Retry-After (another listing is being served); the probe asks again and
// lists the page instead of reporting the Pod as not listed.
func TestSessionsRetriesABusyListing(t *testing.T) {
	f, kc := startFakeAPI(t, map[string]fakeAnswer{
		listURI: {200, podList},
		proxyA:  {200, `{"live":1,"sessions":[` + sessionA + `]}`},
		proxyB:  {200, `{"live":0,"sessions":[]}`},
	})
	f.limited = map[string]int{proxyA: 1}
	code, out, errOut := runSessions(t, "--kubeconfig", kc, "-o", "json")
	if !strings.Contains(out, `"id": "7"`) || strings.Contains(out, "429") {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant gw-a's session 7 listed after the 429", code, errOut, out)
	}
	if want := []string{listURI, proxyA, proxyA, proxyB}; !slices.Equal(f.seen, want) {
		t.Fatalf("requests %q, want %q", f.seen, want)
	}
}
