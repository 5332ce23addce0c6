package relaytoken

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/wirekube/relay-ws/internal/test/testutil"
)

func issueAll(t *testing.T, fc *fakeCluster, issues ...[]string) {
	t.Helper()
	for _, args := range issues {
		if _, _, err := fc.run(t, append([]string{"issue"}, args...)...); err != nil {
			t.Fatalf("issue %v: %v", args, err)
		}
	}
}

func TestList(t *testing.T) {
	unmanaged := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: DefaultNamespace}}
	fc := newFakeCluster(t, []string{"node-a", "node-b", "node-d"}, unmanaged)
	issueAll(t, fc,
		[]string{"--peer", "node-a", "--secret", "tok-a"},
		[]string{"--peer", "node-b", "--secret", "tok-b", "--duration", "30m"},
		[]string{"--peer", "node-c", "--secret", "tok-c", "--allow-missing-peer"},
		[]string{"--peer", "node-d", "--token-file", "-"},
		[]string{"--peer", "node-a", "--secret", "tok-a", "-n", "other"},
	)
	entries, err := (&Tool{Clients: fc.clients()}).List(context.Background(), DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		secrets := []string{}
		for _, s := range e.Secrets {
			secrets = append(secrets, s.Name+"@"+s.Expires.Format("15:04"))
		}
		got = append(got, e.ServiceAccount+" "+e.Peer+" "+e.PeerExists+" "+strings.Join(secrets, ","))
	}
	want := []string{
		"wirekube-relay-peer-node-a node-a yes tok-a@11:00",
		"wirekube-relay-peer-node-b node-b yes tok-b@10:30",
		"wirekube-relay-peer-node-c node-c no tok-c@11:00",
		"wirekube-relay-peer-node-d node-d yes ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("list:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	out, _, err := fc.run(t, "list", "--all-namespaces")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Contains(t, out, "NAMESPACE", "PEER-EXISTS", "other", "tok-b", "2026-11-30T10:30:00Z (in 30m0s)")
	if strings.Contains(out, "default ") {
		t.Errorf("unmanaged ServiceAccount listed:\n%s", out)
	}
}

func TestListPeersForbiddenSaysUnknown(t *testing.T) {
	fc := newFakeCluster(t, []string{"node-a"})
	issueAll(t, fc, []string{"--peer", "node-a", "--secret", "tok-a"})
	fc.dyn.PrependReactor("list", "wirekubepeers", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "wirekube.io", Resource: "wirekubepeers"}, "", errors.New("no"))
	})
	out, _, err := fc.run(t, "list")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Contains(t, out, "node-a", "unknown")
}

func TestListForbidden(t *testing.T) {
	fc := newFakeCluster(t, nil)
	fc.core.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New("no"))
	})
	_, _, err := fc.run(t, "list")
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "may not list secrets in namespace wirekube-system") {
		t.Fatalf("err = %v", err)
	}
}

func TestRevoke(t *testing.T) {
	fc := newFakeCluster(t, []string{"node-a", "node-b"})
	issueAll(t, fc,
		[]string{"--peer", "node-a", "--secret", "tok-a"},
		[]string{"--peer", "node-a", "--secret", "tok-a2"},
		[]string{"--peer", "node-b", "--secret", "tok-b"},
	)
	out, _, err := fc.run(t, "revoke", "--peer", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Contains(t, out, "deleted ServiceAccount wirekube-system/wirekube-relay-peer-node-a",
		"deleted Secret wirekube-system/tok-a\n", "deleted Secret wirekube-system/tok-a2",
		"Sessions already connected with this peer's tokens are closed within seconds (WebSocket 1008\nservice_account_not_found")
	entries, err := (&Tool{Clients: fc.clients()}).List(context.Background(), DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Peer != "node-b" || len(entries[0].Secrets) != 1 {
		t.Fatalf("after revoke: %+v", entries)
	}
	_, _, err = fc.run(t, "revoke", "--peer", "node-a")
	if !errors.Is(err, ErrNothingToDrop) {
		t.Fatalf("second revoke: %v", err)
	}
}

func TestRevokeRefusesUnmanaged(t *testing.T) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "wirekube-relay-peer-node-a", Namespace: DefaultNamespace}}
	fc := newFakeCluster(t, nil, sa)
	_, _, err := fc.run(t, "revoke", "--peer", "node-a")
	if !errors.Is(err, ErrNotManaged) {
		t.Fatalf("err = %v", err)
	}
	if _, err := fc.core.CoreV1().ServiceAccounts(DefaultNamespace).Get(context.Background(), sa.Name, metav1.GetOptions{}); err != nil {
		t.Fatal("unmanaged ServiceAccount deleted")
	}
}

func TestRevokeForbidden(t *testing.T) {
	fc := newFakeCluster(t, []string{"node-a"})
	issueAll(t, fc, []string{"--peer", "node-a", "--secret", "tok-a"})
	fc.core.PrependReactor("delete", "serviceaccounts", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, "x", errors.New("no"))
	})
	_, _, err := fc.run(t, "revoke", "--peer", "node-a")
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "may not delete serviceaccounts") {
		t.Fatalf("err = %v", err)
	}
}

func TestCommandUsage(t *testing.T) {
	fc := newFakeCluster(t, nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "a command is required"},
		{[]string{"rotate"}, `unknown command "rotate"`},
		{[]string{"revoke"}, "--peer is required"},
		{[]string{"revoke", "--peer", "a..b"}, `--peer "a..b"`},
		{[]string{"list", "stray"}, "unexpected argument"},
	} {
		_, _, err := fc.run(t, tc.args...)
		if ExitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: exit %d, err %v, want %q", tc.args, ExitCode(err), err, tc.want)
		}
	}
}

func TestUsageErrorsNeedNoCluster(t *testing.T) {
	noCluster := func(KubeOptions) (Clients, error) { return Clients{}, errors.New("kubeconfig: none found") }
	for _, args := range [][]string{
		{"issue", "--peer", "Bad_Name", "--secret", "s"},
		{"issue", "--peer", "node-a"},
		{"revoke", "--peer", ""},
		{"list", "extra"},
	} {
		var out, errb strings.Builder
		err := command(context.Background(), args, &out, &errb, noCluster, time.Now)
		if ExitCode(err) != 2 || strings.Contains(err.Error(), "kubeconfig") {
			t.Errorf("%v: exit %d, err %v: want a usage error before any cluster access", args, ExitCode(err), err)
		}
	}
}
