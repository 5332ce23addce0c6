package kubeconfig

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

const twoContexts = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: "not-a-real-token"}
contexts:
- name: ctx-a
  context: {cluster: a, user: u}
- name: ctx-b
  context: {cluster: b, user: u, namespace: team-b}
current-context: ctx-a
`

func TestLoadFollowsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ context, host, ns string }{
		{"", "https://a.example:6443", "default"},
		{"ctx-b", "https://b.example:6443", "team-b"},
	} {
		rc, cc, err := Load(path, tc.context, "wirekube-test")
		if err != nil {
			t.Fatalf("context %q: %v", tc.context, err)
		}
		ns, _, err := cc.Namespace()
		if err != nil {
			t.Fatal(err)
		}
		if rc.Host != tc.host || rc.UserAgent != "wirekube-test" || ns != tc.ns {
			t.Errorf("context %q: host %q, user agent %q, namespace %q; want %q, wirekube-test, %q",
				tc.context, rc.Host, rc.UserAgent, ns, tc.host, tc.ns)
		}
	}
}

func TestLoadWithoutAnyConfig(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	if _, _, err := Load("", "", "wirekube-test"); !errors.Is(err, ErrNone) {
		t.Fatalf("err = %v, want ErrNone", err)
	}
}

func TestLoadUnknownContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(path, "ctx-missing", "wirekube-test"); err == nil || errors.Is(err, ErrNone) {
		t.Fatalf("err = %v, want an error about the context", err)
	}
}
