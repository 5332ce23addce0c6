package events

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/wirekube/relay-ws/internal/contract"
)

// eventRefs is a fixed Objects: WireKubePeers node-a and node-c, Node
// node-x (which has no WireKubePeer).
type eventRefs struct{}

func (eventRefs) PeerRef(name string) (corev1.ObjectReference, bool) {
	if name != "node-a" && name != "node-c" {
		return corev1.ObjectReference{}, false
	}
	return corev1.ObjectReference{APIVersion: "wirekube.io/v1alpha1", Kind: "WireKubePeer", Name: name,
		UID: types.UID("uid-peer-" + name)}, true
}

func (eventRefs) NodeRef(name string) (corev1.ObjectReference, bool) {
	if name != "node-x" {
		return corev1.ObjectReference{}, false
	}
	return corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name, UID: "uid-node-x"}, true
}

type eventsEnv struct {
	ev     *Recorder
	client *fake.Clientset
	clock  *clocktesting.FakeClock
	logs   *bytes.Buffer
}

func newEventsEnv(t *testing.T, objects Objects) *eventsEnv {
	t.Helper()
	e := &eventsEnv{client: fake.NewClientset(), clock: clocktesting.NewFakeClock(time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)),
		logs: &bytes.Buffer{}}
	ev, err := New(e.client.CoreV1(), objects, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(e.logs, nil)),
		"gw-pod-1", e.clock)
	must(t, err)
	e.ev = ev
	return e
}

// drain writes every queued Event, as Run would, one millisecond apart (two
// Events of one object at the same instant would get the same name): the
// refusals first, then the revocations, the order least kind to the latter.
func (e *eventsEnv) drain(t *testing.T) {
	t.Helper()
	e.ev.WriteQueued(t.Context(), func() { e.clock.Step(time.Millisecond) })
}

func (e *eventsEnv) events(t *testing.T) []corev1.Event {
	t.Helper()
	l, err := e.client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
	must(t, err)
	return l.Items
}

// result sums a result over both lanes.
func (e *eventsEnv) result(r string) float64 {
	return e.laneResult(laneRefusal, r) + e.laneResult(laneRevocation, r)
}

func (e *eventsEnv) laneResult(lane, r string) float64 {
	return promtest.ToFloat64(e.ev.results.WithLabelValues(lane, r))
}

// TestPeerEventsWritten checks what each revocation and refusal writes: the
// object, namespace, reason, type and message.
func TestPeerEventsWritten(t *testing.T) {
	peerA := corev1.ObjectReference{APIVersion: "wirekube.io/v1alpha1", Kind: "WireKubePeer", Name: "node-a", UID: "uid-peer-node-a"}
	for _, tc := range []struct {
		name   string
		record func(*Recorder)
		want   *corev1.Event // nil: none
	}{
		{"revoked, key changed", func(e *Recorder) { e.Revoked("node-a", contract.ClosePeerKeyChanged) },
			&corev1.Event{InvolvedObject: peerA, Reason: "peer_key_changed", Type: "Warning",
				Message: "relay session revoked: spec.publicKey changed (peer_key_changed)"}},
		{"revoked, agent Pod gone", func(e *Recorder) { e.Revoked("node-a", contract.ReasonPodNotFound) },
			&corev1.Event{InvolvedObject: peerA, Reason: "pod_not_found", Type: "Normal",
				Message: "relay session revoked: the agent Pod is gone (pod_not_found)"}},
		{"refused, duplicate key", func(e *Recorder) {
			e.Refused(Refusal{Reason: contract.ReasonPeerKeyDuplicate, Peer: "node-a", KeyFingerprint: "8c0cc17a"})
		}, &corev1.Event{InvolvedObject: peerA, Reason: "peer_key_duplicate", Type: "Warning",
			Message: "relay upgrade refused: spec.publicKey is also the key of another WireKubePeer (peer_key_duplicate) (key 8c0cc17a)"}},
		{"refused, key held by another binding", func(e *Recorder) {
			e.Refused(Refusal{Reason: contract.ReasonKeyHeldByOtherBinding, Peer: "node-a", KeyFingerprint: "8c0cc17a"})
		}, &corev1.Event{InvolvedObject: peerA, Reason: "key_held_by_other_binding", Type: "Warning",
			Message: "relay upgrade refused: a live session of another identity, Pod or Node holds this peer's key (key_held_by_other_binding) (key 8c0cc17a)"}},
		{"refused, no WireKubePeer: on the Node", func(e *Recorder) {
			e.Refused(Refusal{Reason: contract.ReasonPeerNotFound, Peer: "node-x"})
		}, &corev1.Event{InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "node-x", UID: "uid-node-x"},
			Reason: "peer_not_found", Type: "Warning", Message: "relay upgrade refused: no WireKubePeer of this name (peer_not_found)"}},
		{"refused, neither WireKubePeer nor Node", func(e *Recorder) {
			e.Refused(Refusal{Reason: contract.ReasonPeerNotFound, Peer: "node-q"})
		}, nil},
		{"refused, expired token of node-a's agent", func(e *Recorder) {
			e.Refused(Refusal{Reason: contract.ReasonTokenInvalid, TokenExpired: true, ClaimedNode: "node-a", Admissible: true})
		}, &corev1.Event{InvolvedObject: peerA, Reason: "token_expired", Type: "Warning",
			Message: "relay upgrade refused: the agent's token has expired and was not refreshed (token_invalid, expired)"}},
		{"refused, expired token of an identity no rule admits, naming node-a", func(e *Recorder) {
			e.Refused(Refusal{Reason: contract.ReasonTokenInvalid, TokenExpired: true, ClaimedNode: "node-a"})
		}, nil},
		{"refused, bad signature naming a node: not the peer's business", func(e *Recorder) {
			e.Refused(Refusal{Reason: contract.ReasonTokenInvalid, ClaimedNode: "node-a", Admissible: true})
		}, nil},
		{"refused, bad token: not the peer's business", func(e *Recorder) {
			e.Refused(Refusal{Reason: contract.ReasonTokenInvalid, Peer: "node-a"})
		}, nil},
		{"allowed", func(e *Recorder) { e.Refused(Refusal{Peer: "node-a"}) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEventsEnv(t, eventRefs{})
			tc.record(e.ev)
			e.drain(t)
			got := e.events(t)
			if tc.want == nil {
				if len(got) != 0 {
					t.Fatalf("%d Events, want none: %+v", len(got), got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d Events, want 1: %+v", len(got), got)
			}
			g := got[0]
			if g.Namespace != "default" || g.InvolvedObject != tc.want.InvolvedObject || g.Reason != tc.want.Reason ||
				g.Type != tc.want.Type || g.Message != tc.want.Message || g.Count != 1 ||
				g.Source != (corev1.EventSource{Component: "wirekube-extauthz", Host: "gw-pod-1"}) {
				t.Fatalf("Event %+v,\nwant in namespace default, count 1, source wirekube-extauthz/gw-pod-1: %+v", g, tc.want)
			}
		})
	}
}

// TestPeerEventsRateLimitedPerObject: 20 identical refusals of one peer are
// one Event whose count stops at the burst of 5 (1 create, 4 patches, 15
// rate-limited); another peer still gets its own Event; 5 minutes later the
// first peer's budget has one more write, which carries the whole count.
func TestPeerEventsRateLimitedPerObject(t *testing.T) {
	e := newEventsEnv(t, eventRefs{})
	dup := func(peer string) Refusal {
		return Refusal{Reason: contract.ReasonPeerKeyDuplicate, Peer: peer, KeyFingerprint: "8c0cc17a"}
	}
	for range 20 {
		e.ev.Refused(dup("node-a"))
		e.drain(t)
	}
	e.ev.Refused(dup("node-c"))
	e.drain(t)
	counts := map[string]int32{}
	for _, ev := range e.events(t) {
		counts[ev.InvolvedObject.Name] += ev.Count
	}
	if len(e.events(t)) != 2 || counts["node-a"] != 5 || counts["node-c"] != 1 {
		t.Fatalf("Events %v (%d objects), want node-a count 5, node-c count 1", counts, len(e.events(t)))
	}
	if e.result("created") != 2 || e.result("updated") != 4 || e.result("rate_limited") != 15 {
		t.Fatalf("created %v updated %v rate_limited %v, want 2, 4, 15",
			e.result("created"), e.result("updated"), e.result("rate_limited"))
	}
	e.clock.Step(5 * time.Minute)
	e.ev.Refused(dup("node-a"))
	e.drain(t)
	for _, ev := range e.events(t) {
		if ev.InvolvedObject.Name == "node-a" && ev.Count != 21 {
			t.Fatalf("node-a count %d after the refill, want 21 (every refusal counted)", ev.Count)
		}
	}
}

// TestPeerEventsNeverBlock: with nothing writing, recording beyond the queue
// returns at once and counts the drops.
func TestPeerEventsNeverBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventsEnv(t, eventRefs{})
		done := make(chan struct{})
		go func() {
			for range 256 + 3 {
				e.ev.Revoked("node-a", contract.ClosePeerKeyChanged)
			}
			close(done)
		}()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Revoked blocked on a full queue")
		}
		if got := e.result("dropped"); got != 3 {
			t.Fatalf("dropped %v, want 3", got)
		}
	})
}

// TestPeerEventsForbiddenLogsOnce: without RBAC for Events every write fails;
// the failure is logged once and counted each time, and logged again only
// after a write succeeded.
func TestPeerEventsForbiddenLogsOnce(t *testing.T) {
	e := newEventsEnv(t, eventRefs{})
	forbid := true
	e.client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		if forbid {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", errors.New("RBAC"))
		}
		return false, nil, nil
	})
	e.ev.Revoked("node-a", contract.ClosePeerKeyChanged)
	e.ev.Revoked("node-c", contract.ClosePeerKeyChanged)
	e.ev.Refused(Refusal{Reason: contract.ReasonPeerNotFound, Peer: "node-x"})
	e.drain(t)
	const line = "cannot write Kubernetes Events"
	if n := strings.Count(e.logs.String(), line); n != 1 || e.result("failed") != 3 {
		t.Fatalf("%d log lines %q and %v failures, want 1 line and 3 failures; logs:\n%s", n, line, e.result("failed"), e.logs)
	}
	if !strings.Contains(e.logs.String(), "reason=Forbidden") {
		t.Fatalf("the log line does not name the API's reason: %s", e.logs)
	}
	forbid = false
	e.ev.Revoked("node-a", contract.ReasonPodNotFound)
	e.drain(t)
	forbid = true
	e.ev.Revoked("node-c", contract.ReasonPodNotFound)
	e.drain(t)
	if n := strings.Count(e.logs.String(), line); n != 2 || e.result("created") != 1 {
		t.Fatalf("%d log lines, %v created, want a second line after a success and 1 created; logs:\n%s", n, e.result("created"), e.logs)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
