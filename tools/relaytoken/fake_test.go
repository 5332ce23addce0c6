package relaytoken

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var testNow = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// tokenPrefix starts every fake token, so tests can grep output for it.
const tokenPrefix = "fake-token-SECRET-"

// fakeCluster is a client-go fake clientset plus a dynamic fake holding
// WireKubePeers, with a TokenRequest reactor that behaves like the API
// server: 404 for a missing ServiceAccount, the requested expiry.
type fakeCluster struct {
	core     *fake.Clientset
	dyn      *dynamicfake.FakeDynamicClient
	issued   atomic.Int64
	audience atomic.Value // last requested audience
}

func newFakeCluster(t *testing.T, peers []string, objs ...runtime.Object) *fakeCluster {
	t.Helper()
	var peerObjs []runtime.Object
	for _, p := range peers {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("wirekube.io/v1alpha1")
		u.SetKind("WireKubePeer")
		u.SetName(p)
		peerObjs = append(peerObjs, u)
	}
	fc := &fakeCluster{
		core: fake.NewClientset(objs...),
		dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{PeerResource: "WireKubePeerList"}, peerObjs...),
	}
	fc.core.PrependReactor("create", "serviceaccounts", fc.tokenReactor)
	return fc
}

func (fc *fakeCluster) tokenReactor(action k8stesting.Action) (bool, runtime.Object, error) {
	ca, ok := action.(k8stesting.CreateAction)
	if !ok || action.GetSubresource() != "token" {
		return false, nil, nil
	}
	name := ca.(k8stesting.CreateActionImpl).Name
	if _, err := fc.core.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"},
		action.GetNamespace(), name); err != nil {
		return true, nil, err
	}
	req := ca.GetObject().(*authenticationv1.TokenRequest)
	fc.audience.Store(strings.Join(req.Spec.Audiences, ","))
	n := fc.issued.Add(1)
	out := req.DeepCopy()
	out.Status = authenticationv1.TokenRequestStatus{
		Token:               fmt.Sprintf("%s%s-%d", tokenPrefix, name, n),
		ExpirationTimestamp: metav1.NewTime(testNow.Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second)),
	}
	return true, out, nil
}

func (fc *fakeCluster) clients() Clients { return Clients{Core: fc.core.CoreV1(), Dynamic: fc.dyn} }

// run runs the CLI against the fake cluster and fails the test if a token
// shows up anywhere except stdout of `issue --token-file -`.
func (fc *fakeCluster) run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	factory := func(KubeOptions) (Clients, error) { return fc.clients(), nil }
	err = command(context.Background(), args, &out, &errb, factory, func() time.Time { return testNow })
	stdoutMayHoldToken := len(args) > 0 && args[0] == "issue" && (hasArgs(args, "--output", "-") || hasArgs(args, "--token-file", "-"))
	check := errb.String()
	if err != nil {
		check += err.Error()
	}
	if !stdoutMayHoldToken {
		check += out.String()
	}
	if strings.Contains(check, tokenPrefix) {
		t.Fatalf("a token leaked into the report:\n%s", check)
	}
	return out.String(), errb.String(), err
}

func hasArgs(args []string, pair ...string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == pair[0] && args[i+1] == pair[1] {
			return true
		}
	}
	return false
}
