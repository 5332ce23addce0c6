package relaytoken

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestListOutputFormats: list -o json and -o yaml print the same items,
// parsed back here.
func TestListOutputFormats(t *testing.T) {
	fc := newFakeCluster(t, []string{"node-a"})
	if _, _, err := fc.run(t, "issue", "--peer", "node-a", "--secret", "tok-a"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-o", "json"}, {"--output", "yaml"}, {"-o=yaml", "-A"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, _, err := fc.run(t, append([]string{"list"}, args...)...)
			if err != nil {
				t.Fatal(err)
			}
			var got ListOutput
			if strings.Contains(strings.Join(args, " "), "json") {
				err = json.Unmarshal([]byte(out), &got)
			} else {
				err = yaml.Unmarshal([]byte(out), &got)
			}
			if err != nil || len(got.Items) != 1 {
				t.Fatalf("parsed %+v (%v) from:\n%s", got, err, out)
			}
			e := got.Items[0]
			if e.Namespace != DefaultNamespace || e.Peer != "node-a" || e.PeerExists != "yes" ||
				e.ServiceAccount != "wirekube-relay-peer-node-a" || len(e.Secrets) != 1 || e.Secrets[0].Name != "tok-a" ||
				!e.Secrets[0].Expires.Equal(testNow.Add(DefaultDuration)) {
				t.Errorf("entry %+v", e)
			}
		})
	}
	if _, _, err := fc.run(t, "list", "-o", "xml"); ExitCode(err) != 2 || !strings.Contains(err.Error(), "-o/--output") {
		t.Errorf("-o xml: %v", err)
	}
	if _, _, err := fc.run(t, "list", "-A", "-n", "x"); ExitCode(err) != 2 {
		t.Errorf("-A with -n: %v", err)
	}
}

// TestIssueDeprecatedOutput: --output FILE still writes the token file for
// one release, and warns on stderr that --token-file replaces it.
func TestIssueDeprecatedOutput(t *testing.T) {
	fc := newFakeCluster(t, []string{"node-a"})
	path := filepath.Join(t.TempDir(), "token")
	out, errOut, err := fc.run(t, "issue", "--peer", "node-a", "--output", path)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || !strings.HasPrefix(string(b), tokenPrefix) {
		t.Fatalf("token file: %q %v", b, err)
	}
	if !strings.Contains(errOut, "warning: --output is deprecated") || !strings.Contains(errOut, "use --token-file") {
		t.Errorf("no deprecation warning on stderr: %q", errOut)
	}
	if strings.Contains(out, "deprecated") {
		t.Errorf("the warning went to stdout: %q", out)
	}
	_, errOut, err = fc.run(t, "issue", "--peer", "node-a", "--token-file", path)
	if err != nil || strings.Contains(errOut, "deprecated") {
		t.Errorf("--token-file warned: %q %v", errOut, err)
	}
}

// nsServer records the paths `list` asks for and answers empty lists.
type nsServer struct {
	mu    sync.Mutex
	paths []string
	srv   *httptest.Server
}

func (s *nsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.paths = append(s.paths, r.URL.Path)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"kind":"List","apiVersion":"v1","items":[]}`)
}

func (s *nsServer) asked() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.paths, " ")
}

// TestNamespaceFromKubeconfigContext: without -n the namespace is the
// kubeconfig context's, else wirekube-system; -n wins; -A lists all.
func TestNamespaceFromKubeconfigContext(t *testing.T) {
	s := &nsServer{}
	s.srv = httptest.NewServer(s)
	t.Cleanup(s.srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: tenant
clusters:
- name: c
  cluster: {server: %s}
users:
- name: u
  user: {token: kubeconfig-credential}
contexts:
- name: tenant
  context: {cluster: c, user: u, namespace: tenant-a}
- name: bare
  context: {cluster: c, user: u}
`, s.srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"context namespace", nil, "/api/v1/namespaces/tenant-a/serviceaccounts"},
		{"-n wins", []string{"-n", "other"}, "/api/v1/namespaces/other/serviceaccounts"},
		{"--namespace wins", []string{"--namespace", "other"}, "/api/v1/namespaces/other/serviceaccounts"},
		{"context without namespace", []string{"--context", "bare"}, "/api/v1/namespaces/wirekube-system/serviceaccounts"},
		{"all namespaces", []string{"--all-namespaces"}, "/api/v1/serviceaccounts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.mu.Lock()
			s.paths = nil
			s.mu.Unlock()
			var out, errb bytes.Buffer
			args := append([]string{"list", "--kubeconfig", kubeconfig}, tc.args...)
			if err := command(context.Background(), args, &out, &errb, NewClients, time.Now); err != nil {
				t.Fatalf("%v\n%s", err, errb.String())
			}
			if got := s.asked(); !strings.Contains(" "+got+" ", " "+tc.want+" ") {
				t.Errorf("asked %q, want %s", got, tc.want)
			}
		})
	}
}

func TestLogLevel(t *testing.T) {
	fc := newFakeCluster(t, nil)
	_, errOut, err := fc.run(t, "list", "--log-level", "debug", "-n", "ns1")
	if err != nil || !strings.Contains(errOut, "level=DEBUG msg=\"clients ready\"") || !strings.Contains(errOut, "namespace_flag=ns1") {
		t.Errorf("debug: %v\n%s", err, errOut)
	}
	if _, errOut, _ := fc.run(t, "list"); strings.Contains(errOut, "clients ready") {
		t.Errorf("info printed debug lines: %s", errOut)
	}
	if _, _, err := fc.run(t, "list", "--log-level", "loud"); ExitCode(err) != 2 || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("bad level: %v", err)
	}
}
