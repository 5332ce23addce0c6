package relaytoken

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/wirekube/relay-ws/internal/test/testutil"
)

func getSecret(t *testing.T, fc *fakeCluster, ns, name string) *corev1.Secret {
	t.Helper()
	s, err := fc.core.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("secret %s/%s: %v", ns, name, err)
	}
	return s
}

func TestIssueToSecret(t *testing.T) {
	fc := newFakeCluster(t, []string{"node-a"})
	out, _, err := fc.run(t, "issue", "--peer", "node-a", "--secret", "relay-token-node-a", "--duration", "2h")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Contains(t, out, "ServiceAccount wirekube-system/wirekube-relay-peer-node-a created",
		"written to Secret wirekube-system/relay-token-node-a (key token)", "expires 2026-11-30T12:00:00Z (in 2h0m0s)")
	sa, err := fc.core.CoreV1().ServiceAccounts(DefaultNamespace).Get(context.Background(), "wirekube-relay-peer-node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sa.Labels[LabelManagedBy] != ManagedByValue || sa.Labels[LabelPeer] != "node-a" || sa.Annotations[AnnotationPeer] != "node-a" {
		t.Errorf("ServiceAccount metadata: %v %v", sa.Labels, sa.Annotations)
	}
	s := getSecret(t, fc, DefaultNamespace, "relay-token-node-a")
	if got := string(s.Data[SecretTokenKey]); !strings.HasPrefix(got, tokenPrefix+"wirekube-relay-peer-node-a") {
		t.Errorf("secret token %q", got)
	}
	if s.Annotations[AnnotationExpires] != "2026-11-30T12:00:00Z" || !isManaged(s.Labels) || s.Type != corev1.SecretTypeOpaque {
		t.Errorf("secret metadata: %+v", s.ObjectMeta)
	}
	if a, _ := fc.audience.Load().(string); a != "wirekube-relay" {
		t.Errorf("audience %q", a)
	}
}

func TestIssueTwiceKeepsOneServiceAccount(t *testing.T) {
	fc := newFakeCluster(t, []string{"node-a"})
	for i, want := range []string{"created", "exists"} {
		out, _, err := fc.run(t, "issue", "--peer", "node-a", "--secret", "tok")
		if err != nil {
			t.Fatalf("issue %d: %v", i, err)
		}
		testutil.Contains(t, out, "wirekube-relay-peer-node-a "+want)
	}
	l, _ := fc.core.CoreV1().ServiceAccounts(DefaultNamespace).List(context.Background(), metav1.ListOptions{})
	if len(l.Items) != 1 {
		t.Fatalf("%d ServiceAccounts, want 1", len(l.Items))
	}
	if got := string(getSecret(t, fc, DefaultNamespace, "tok").Data[SecretTokenKey]); !strings.HasSuffix(got, "-2") {
		t.Errorf("the Secret holds %q, not the second token", got)
	}
}

func TestIssueToFile(t *testing.T) {
	fc := newFakeCluster(t, []string{"node-a"})
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := fc.run(t, "issue", "--peer", "node-a", "--token-file", path)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Contains(t, out, "written to "+path)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(b), tokenPrefix) || !strings.HasSuffix(string(b), "\n") {
		t.Errorf("file holds %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestWriteTokenFileFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	if err := WriteTokenFile(filepath.Join(dir, "missing", "token"), "t"); err == nil || !strings.Contains(err.Error(), "--token-file") {
		t.Fatalf("err = %v", err)
	}
	// The target is a directory: rename fails after the temp file was made.
	target := filepath.Join(dir, "adir")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteTokenFile(target, "t"); err == nil {
		t.Fatal("rename over a non-empty directory succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestIssueToStdout(t *testing.T) {
	fc := newFakeCluster(t, []string{"node-a"})
	out, errOut, err := fc.run(t, "issue", "--peer", "node-a", "--token-file", "-")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, tokenPrefix) || strings.Count(out, "\n") != 1 {
		t.Errorf("stdout must be the token alone: %q", out)
	}
	testutil.Contains(t, errOut, "written to stdout", "expires")
}

func TestIssueMissingPeer(t *testing.T) {
	fc := newFakeCluster(t, nil)
	_, _, err := fc.run(t, "issue", "--peer", "node-x", "--secret", "s")
	if !errors.Is(err, ErrPeerNotFound) || !strings.Contains(err.Error(), "--allow-missing-peer") {
		t.Fatalf("err = %v", err)
	}
	if l, _ := fc.core.CoreV1().ServiceAccounts("").List(context.Background(), metav1.ListOptions{}); len(l.Items) != 0 {
		t.Error("a ServiceAccount was created for a missing peer")
	}
	out, _, err := fc.run(t, "issue", "--peer", "node-x", "--secret", "s", "--allow-missing-peer")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Contains(t, out, `warning: WireKubePeer "node-x" does not exist`)
}

func TestIssueAdoptsHandMadeServiceAccount(t *testing.T) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "wirekube-relay-peer-node-a", Namespace: DefaultNamespace}}
	fc := newFakeCluster(t, []string{"node-a"}, sa)
	out, _, err := fc.run(t, "issue", "--peer", "node-a", "--token-file", filepath.Join(t.TempDir(), "t"))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Contains(t, out, "wirekube-relay-peer-node-a adopted")
	got, _ := fc.core.CoreV1().ServiceAccounts(DefaultNamespace).Get(context.Background(), sa.Name, metav1.GetOptions{})
	if !isManaged(got.Labels) {
		t.Errorf("labels %v", got.Labels)
	}
}

func TestIssueRefusesForeignSecret(t *testing.T) {
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-password", Namespace: DefaultNamespace},
		Data: map[string][]byte{"password": []byte("x")}}
	fc := newFakeCluster(t, []string{"node-a"}, foreign)
	_, _, err := fc.run(t, "issue", "--peer", "node-a", "--secret", "db-password")
	if !errors.Is(err, ErrNotManaged) {
		t.Fatalf("err = %v", err)
	}
	if s := getSecret(t, fc, DefaultNamespace, "db-password"); string(s.Data["password"]) != "x" || s.Data[SecretTokenKey] != nil {
		t.Error("a foreign Secret was overwritten")
	}
}

func TestIssueAPIErrors(t *testing.T) {
	saGR := schema.GroupResource{Resource: "serviceaccounts"}
	for _, tc := range []struct {
		name     string
		verb     string
		sub      string
		err      error
		sentinel error
		want     string
	}{
		{"token forbidden", "create", "token", apierrors.NewForbidden(saGR, "wirekube-relay-peer-node-a", errors.New("RBAC: denied")),
			ErrForbidden, "may not create serviceaccounts/token in namespace wirekube-system"},
		{"sa forbidden", "get", "", apierrors.NewForbidden(saGR, "x", errors.New("RBAC: denied")),
			ErrForbidden, "kubectl auth can-i get serviceaccounts -n wirekube-system"},
		{"namespace missing", "create", "", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, DefaultNamespace),
			ErrNamespace, `namespace not found: "wirekube-system"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFakeCluster(t, []string{"node-a"})
			fc.core.PrependReactor(tc.verb, "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
				return a.GetSubresource() == tc.sub, nil, tc.err
			})
			_, _, err := fc.run(t, "issue", "--peer", "node-a", "--secret", "s")
			if !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.sentinel, tc.want)
			}
			if ExitCode(err) != 1 {
				t.Errorf("exit %d", ExitCode(err))
			}
		})
	}
}

func TestIssuePeerForbidden(t *testing.T) {
	fc := newFakeCluster(t, []string{"node-a"})
	fc.dyn.PrependReactor("get", "wirekubepeers", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "wirekube.io", Resource: "wirekubepeers"}, "node-a", errors.New("no"))
	})
	_, _, err := fc.run(t, "issue", "--peer", "node-a", "--secret", "s")
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "get wirekubepeers.wirekube.io cluster-wide") {
		t.Fatalf("err = %v", err)
	}
}

func TestIssueUsage(t *testing.T) {
	fc := newFakeCluster(t, []string{"node-a"})
	long := strings.Repeat("a", 234) // fits a peer name, not the ServiceAccount name
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no peer", []string{"--secret", "s"}, "--peer is required"},
		{"upper case peer", []string{"--peer", "Node_A", "--secret", "s"}, `--peer "Node_A"`},
		{"peer too long for the ServiceAccount", []string{"--peer", long, "--secret", "s"}, "ServiceAccount name"},
		{"no destination", []string{"--peer", "node-a"}, "exactly one of --secret"},
		{"two destinations", []string{"--peer", "node-a", "--secret", "s", "--token-file", "-"}, "exactly one of --secret"},
		{"short duration", []string{"--peer", "node-a", "--secret", "s", "--duration", "5m"}, "--duration 5m0s"},
		{"bad secret name", []string{"--peer", "node-a", "--secret", "Bad_Name"}, "--secret"},
		{"bad namespace", []string{"--peer", "node-a", "--secret", "s", "-n", "a.b"}, "--namespace"},
		{"unknown flag", []string{"--bogus"}, "bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, err := fc.run(t, append([]string{"issue"}, tc.args...)...)
			if ExitCode(err) != 2 || !strings.Contains(err.Error()+errOut, tc.want) {
				t.Fatalf("exit %d, err %v, want %q", ExitCode(err), err, tc.want)
			}
		})
	}
	if n := fc.issued.Load(); n != 0 {
		t.Errorf("%d tokens issued by invalid invocations", n)
	}
}

func TestIssueReportsServerChosenLifetime(t *testing.T) {
	fc := newFakeCluster(t, []string{"node-a"})
	fc.core.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		handled, obj, err := fc.tokenReactor(a)
		if tr, ok := obj.(*authenticationv1.TokenRequest); ok {
			tr.Status.ExpirationTimestamp = metav1.NewTime(testNow.Add(time.Hour)) // the server caps the lifetime
		}
		return handled, obj, err
	})
	out, _, err := fc.run(t, "issue", "--peer", "node-a", "--secret", "s", "--duration", "48h")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Contains(t, out, "expires 2026-11-30T11:00:00Z (in 1h0m0s)", "note: the API server chose this lifetime; 48h0m0s was requested")
	if got := getSecret(t, fc, DefaultNamespace, "s").Annotations[AnnotationExpires]; got != "2026-11-30T11:00:00Z" {
		t.Errorf("expiry annotation %q", got)
	}
}

// TestIssueValidateReportsEveryProblem: one run names every bad flag.
func TestIssueValidateReportsEveryProblem(t *testing.T) {
	err := IssueOptions{Peer: "Bad_Peer", Duration: time.Minute, Secret: "a_b", Namespace: "x.y"}.Validate()
	for _, f := range []string{"Bad_Peer", "--duration", "--secret", "--namespace"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("Validate() = %v, want it to name %s", err, f)
		}
	}
	if ExitCode(err) != 2 {
		t.Errorf("exit %d, want 2 (usage)", ExitCode(err))
	}
}

// TestIssueRequestsAnUnboundToken: the token is bound to no object, least
// of all the Secret it is stored in. The gateway refuses Secret-bound tokens
// (token_secret_bound: it cannot follow Secrets); an unbound token of the
// dedicated ServiceAccount is revoked by `revoke`, which deletes the
// ServiceAccount (docs/revocation.md#identities).
func TestIssueRequestsAnUnboundToken(t *testing.T) {
	fc := newFakeCluster(t, []string{"node-a"})
	var bound []*authenticationv1.BoundObjectReference
	fc.core.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if tr, ok := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest); ok && a.GetSubresource() == "token" {
			bound = append(bound, tr.Spec.BoundObjectRef)
		}
		return false, nil, nil
	})
	for _, dest := range [][]string{{"--secret", "s"}, {"--token-file", filepath.Join(t.TempDir(), "tok")}} {
		if _, _, err := fc.run(t, append([]string{"issue", "--peer", "node-a"}, dest...)...); err != nil {
			t.Fatal(err)
		}
	}
	if len(bound) != 2 || bound[0] != nil || bound[1] != nil {
		t.Fatalf("token requests bound to %v, want 2 unbound requests", bound)
	}
}
