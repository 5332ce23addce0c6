package meshwatch

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"go.uber.org/goleak"

	"github.com/wirekube/relay-ws/extauthz/internal/events"
	"github.com/wirekube/relay-ws/extauthz/internal/kubewatch"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// meshObject is a WireKubeMesh whose spec.relay is relay.
func meshObject(name string, relay map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"relay": relay}}}
	u.SetAPIVersion("wirekube.io/v1alpha1")
	u.SetKind(Kind)
	u.SetName(name)
	u.SetUID(types.UID("uid-mesh-" + name))
	return u
}

func wssMesh(name, transport, control string) *unstructured.Unstructured {
	return meshObject(name, map[string]any{"mode": "auto", "provider": "managed",
		"managed": map[string]any{"transport": transport, "controlEndpoint": control}})
}

func wsMesh(name, control string) *unstructured.Unstructured {
	return meshObject(name, map[string]any{"mode": "auto", "provider": "external",
		"external": map[string]any{"transport": "ws", "controlEndpoint": control}})
}

// meshEnv runs a MeshWatch over fake clients, its Events into kube.
type meshEnv struct {
	dyn  *dynamicfake.FakeDynamicClient
	kube *fake.Clientset
	w    *Watch
	logs testutil.SyncBuffer
}

func startMeshWatch(t *testing.T, objs ...*unstructured.Unstructured) *meshEnv {
	t.Helper()
	e := &meshEnv{kube: fake.NewClientset()}
	// Created through the client: the fake's tracker would file objects
	// given to the constructor under a guessed plural (wirekubemeshs).
	e.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GVR: "WireKubeMeshList"})
	for _, o := range objs {
		_, err := e.dyn.Resource(GVR).Create(t.Context(), o, metav1.CreateOptions{})
		must(t, err)
	}
	log := slog.New(slog.NewJSONHandler(&e.logs, nil))
	reg := prometheus.NewRegistry()
	rec, err := events.New(e.kube.CoreV1(), noEventObjects{}, reg, log, "gw-pod-1", nil)
	must(t, err)
	e.w, err = New(kubewatch.NoWatchList{ResourceInterface: e.dyn.Resource(GVR)}, testExpected(t), rec, reg, log, nil)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// wantGauges checks wirekube_extauthz_mesh_relay_targets for every target
// (absent from want: 0).
func (e *meshEnv) wantGauges(t *testing.T, want map[contract.MeshRelayTarget]float64) {
	t.Helper()
	for _, tg := range contract.MeshRelayTargets {
		if got := promtest.ToFloat64(e.w.targets.WithLabelValues(string(tg))); got != want[tg] {
			t.Errorf("%s{target=%s} = %v, want %v", contract.MetricMeshRelayTargets, tg, got, want[tg])
		}
	}
}

func (e *meshEnv) events(t *testing.T) []corev1.Event {
	t.Helper()
	l, err := e.kube.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{})
	must(t, err)
	return l.Items
}

// TestMeshWatchReportsTargets: meshes pointed at ws://, at a foreign wss
// host, at this gateway and at the raw relay are counted by target, the
// exposing ones get a Warning Event each, and rewriting this gateway's mesh
// to ws:// is seen, counted and recorded on that mesh.
func TestMeshWatchReportsTargets(t *testing.T) {
	e := startMeshWatch(t,
		wsMesh("cleartext", "ws://10.0.0.9:8080/relay"),
		wssMesh("foreign", "wss", "wss://relay.attacker.test/relay"),
		wssMesh("ours", "wss", "wss://relay.corp.test/relay"),
		wssMesh("rawtcp", "tcp", ""))
	testutil.Eventually(t, "four meshes judged", func() bool { return len(e.w.Targets()) == 4 })
	e.wantGauges(t, map[contract.MeshRelayTarget]float64{"this_gateway": 1, "ws_cleartext": 1, "other_wss": 1, "raw_tcp": 1})
	if got := promtest.ToFloat64(e.w.synced); got != 1 {
		t.Errorf("%s = %v, want 1", contract.MetricMeshRelayWatchSynced, got)
	}
	testutil.Eventually(t, "two Events", func() bool { return len(e.events(t)) == 2 })

	_, err := e.dyn.Resource(GVR).Update(t.Context(), wsMesh("ours", "ws://relay.corp.test/relay"), metav1.UpdateOptions{})
	must(t, err)
	testutil.Eventually(t, "the rewrite judged", func() bool { return e.w.Targets()[contract.MeshRelayWSCleartext] == 2 })
	e.wantGauges(t, map[contract.MeshRelayTarget]float64{"ws_cleartext": 2, "other_wss": 1, "raw_tcp": 1})
	if got := promtest.ToFloat64(e.w.changes.WithLabelValues("ws_cleartext")); got != 2 {
		t.Errorf("%s{target=ws_cleartext} = %v, want 2", contract.MetricMeshRelayChanges, got)
	}
	testutil.Eventually(t, "three Events", func() bool { return len(e.events(t)) == 3 })
	got := map[string]string{}
	for _, ev := range e.events(t) {
		if ev.InvolvedObject.Kind != "WireKubeMesh" || ev.InvolvedObject.APIVersion != "wirekube.io/v1alpha1" ||
			ev.InvolvedObject.UID != types.UID("uid-mesh-"+ev.InvolvedObject.Name) || ev.Type != "Warning" {
			t.Errorf("Event %+v: want a Warning about the WireKubeMesh by apiVersion, kind, name and UID", ev.InvolvedObject)
		}
		got[ev.InvolvedObject.Name] = ev.Reason
	}
	want := map[string]string{"cleartext": "ws_cleartext", "foreign": "other_wss", "ours": "ws_cleartext"}
	if len(got) != len(want) || got["cleartext"] != want["cleartext"] || got["foreign"] != want["foreign"] || got["ours"] != want["ours"] {
		t.Errorf("Events by mesh %v, want %v", got, want)
	}
}

// TestMeshWatchLogsNoURL: neither the log nor an Event carries any part of
// a URL a node wrote into the mesh; the log has the classification.
func TestMeshWatchLogsNoURL(t *testing.T) {
	e := startMeshWatch(t, wsMesh("cleartext", "ws://10.0.0.9:8080/secret-path?token=abc"),
		wssMesh("foreign", "wss", "wss://relay.attacker.test/relay"))
	testutil.Eventually(t, "two Events", func() bool { return len(e.events(t)) == 2 })
	logs := e.logs.String()
	var text strings.Builder
	text.WriteString(logs)
	for _, ev := range e.events(t) {
		text.WriteString(ev.Message)
	}
	for _, secret := range []string{"10.0.0.9", "8080", "secret-path", "token=abc", "attacker"} {
		if strings.Contains(text.String(), secret) {
			t.Errorf("%q in the log or an Event", secret)
		}
	}
	// printf %s wss://relay.attacker.test/relay | sha256sum | cut -c1-8
	for _, want := range []string{`"target":"other_wss"`, `"endpoint_sha256":"15b31577"`, `"host_match":false`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
}

// TestMeshWatchLogBound: a mesh rewritten in a loop is logged meshLogBurst
// times and then once more per meshLogEvery, with one line saying the rest
// is only counted; every change is counted.
func TestMeshWatchLogBound(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC))
	var logs testutil.SyncBuffer
	w, err := New(kubewatch.NoWatchList{ResourceInterface: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()).Resource(GVR)},
		nil, nil, prometheus.NewRegistry(), slog.New(slog.NewJSONHandler(&logs, nil)), clk)
	must(t, err)
	u := wsMesh("m", "ws://10.0.0.9/relay")
	r := meshRelay{Target: contract.MeshRelayWSCleartext}
	for range 12 {
		w.changed(u, meshRelay{}, r)
	}
	clk.SetTime(clk.Now().Add(30 * time.Second))
	w.changed(u, meshRelay{}, r)
	if n := strings.Count(logs.String(), `"target":"ws_cleartext"`); n != 11 {
		t.Errorf("%d change lines, want 10 then 1 after 30 s", n)
	}
	if n := strings.Count(logs.String(), "faster than they are logged"); n != 1 {
		t.Errorf("%d suppression lines, want 1", n)
	}
	if got := promtest.ToFloat64(w.changes.WithLabelValues("ws_cleartext")); got != 13 {
		t.Errorf("%s = %v, want 13", contract.MetricMeshRelayChanges, got)
	}
}

// noEventObjects resolves no WireKubePeer and no Node: the mesh watch's
// Events name their object themselves.
type noEventObjects struct{}

func (noEventObjects) PeerRef(string) (corev1.ObjectReference, bool) {
	return corev1.ObjectReference{}, false
}
func (noEventObjects) NodeRef(string) (corev1.ObjectReference, bool) {
	return corev1.ObjectReference{}, false
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
