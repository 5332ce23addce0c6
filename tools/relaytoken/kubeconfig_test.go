package relaytoken

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// apiServer answers the three list calls of `list` with one managed
// ServiceAccount whose peer is named after the server.
type apiServer struct {
	name string
	hits atomic.Int64
	srv  *httptest.Server
}

func newAPIServer(t *testing.T, name string) *apiServer {
	a := &apiServer{name: name}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	a.hits.Add(1)
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/api/v1/namespaces/wirekube-system/serviceaccounts":
		fmt.Fprintf(w, `{"kind":"ServiceAccountList","apiVersion":"v1","items":[{"metadata":{"name":"wirekube-relay-peer-%s","namespace":"wirekube-system","labels":{%q:%q},"annotations":{%q:%q}}}]}`,
			a.name, LabelManagedBy, ManagedByValue, AnnotationPeer, a.name)
	case "/api/v1/namespaces/wirekube-system/secrets":
		fmt.Fprint(w, `{"kind":"SecretList","apiVersion":"v1","items":[]}`)
	case "/apis/wirekube.io/v1alpha1/wirekubepeers":
		fmt.Fprintf(w, `{"kind":"WireKubePeerList","apiVersion":"wirekube.io/v1alpha1","items":[{"apiVersion":"wirekube.io/v1alpha1","kind":"WireKubePeer","metadata":{"name":%q}}]}`, a.name)
	default:
		http.NotFound(w, r)
	}
}

func writeKubeconfig(t *testing.T, servers ...*apiServer) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\ncurrent-context: " + servers[0].name + "\nclusters:\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "- name: %s\n  cluster:\n    server: %s\n", s.name, s.srv.URL)
	}
	b.WriteString("users:\n- name: u\n  user:\n    token: kubeconfig-credential\ncontexts:\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "- name: %s\n  context:\n    cluster: %s\n    user: u\n", s.name, s.name)
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestKubeconfigSelection(t *testing.T) {
	alpha, beta := newAPIServer(t, "alpha"), newAPIServer(t, "beta")
	path := writeKubeconfig(t, alpha, beta)
	for _, tc := range []struct {
		name    string
		env     string
		args    []string
		want    *apiServer
		notWant *apiServer
	}{
		{"--kubeconfig, current context", "", []string{"--kubeconfig", path}, alpha, beta},
		{"--kubeconfig --context", "", []string{"--kubeconfig", path, "--context", "beta"}, beta, alpha},
		{"KUBECONFIG", path, []string{"--context", "beta"}, beta, alpha},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			t.Setenv("HOME", t.TempDir())
			before := tc.notWant.hits.Load()
			var out, errb bytes.Buffer
			err := command(context.Background(), append([]string{"list"}, tc.args...), &out, &errb, NewClients, time.Now)
			if err != nil {
				t.Fatalf("%v\n%s", err, errb.String())
			}
			testutil.Contains(t, out.String(), "wirekube-relay-peer-"+tc.want.name, tc.want.name+"  ")
			if tc.notWant.hits.Load() != before {
				t.Errorf("the other cluster was called")
			}
		})
	}
}

func TestKubeconfigMissing(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	var out, errb bytes.Buffer
	err := command(context.Background(), []string{"list"}, &out, &errb, NewClients, time.Now)
	if err == nil || !strings.Contains(err.Error(), "pass --kubeconfig, set KUBECONFIG, or run in a Pod") {
		t.Fatalf("err = %v", err)
	}
	err = command(context.Background(), []string{"list", "--kubeconfig", "/nonexistent/kubeconfig"}, &out, &errb, NewClients, time.Now)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/kubeconfig") {
		t.Fatalf("err = %v", err)
	}
}
