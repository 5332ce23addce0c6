package extauthz

import (
	"bytes"
	"context"
	"github.com/wirekube/relay-ws/extauthz/internal/binding"
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

var (
	fixtureKey  = relayproto.Key(bytes.Repeat([]byte{7}, 32)) // node-a's
	fixtureKeyB = relayproto.Key(bytes.Repeat([]byte{5}, 32)) // node-b's
)

func podBinding() revocation.Binding {
	return binding.Of(&binding.Subject{Username: "system:serviceaccount:wirekube-system:wirekube-agent", UID: agentSAUID,
		PodName: "agent-a", PodUID: podAUID, NodeName: "node-a", NodeUID: nodeAUID}, "node-a", "node-a", fixtureKey)
}

func nodeBinding() revocation.Binding {
	return binding.Of(&binding.Subject{Username: "system:serviceaccount:wirekube-system:wirekube-agent", UID: agentSAUID,
		NodeName: "node-a", NodeUID: nodeAUID}, "node-a", "node-a", fixtureKey)
}

func peerSABinding() revocation.Binding {
	return binding.Of(&binding.Subject{Username: "system:serviceaccount:wirekube-system:wirekube-relay-peer-node-b",
		UID: "uid-sa-peer-b"}, "", "node-b", fixtureKeyB)
}

// peerPodBinding is a per-peer ServiceAccount's Pod-bound token (Pod
// peer-b-pod on node-a), as a projected token is.
func peerPodBinding() revocation.Binding {
	return binding.Of(&binding.Subject{Username: "system:serviceaccount:wirekube-system:wirekube-relay-peer-node-b",
		UID: "uid-sa-peer-b", PodName: "peer-b-pod", PodUID: "uid-pod-peer-b", NodeName: "node-a", NodeUID: nodeAUID},
		"node-a", "node-b", fixtureKeyB)
}

// podNoNodeBinding is a Pod-bound agent token that names no Node (API
// servers before the Pod's node info in tokens): admission recorded the
// Pod's node.
func podNoNodeBinding() revocation.Binding {
	return binding.Of(&binding.Subject{Username: "system:serviceaccount:wirekube-system:wirekube-agent", UID: agentSAUID,
		PodName: "agent-a", PodUID: podAUID}, "node-a", "node-a", fixtureKey)
}

// TestRejudge changes one object per case through the fake API and waits
// for the informers: the binding must then end with the case's reason.
func TestRejudge(t *testing.T) {
	ctx := context.Background()
	del := metav1.DeleteOptions{}
	for _, tc := range []struct {
		name    string
		binding revocation.Binding
		change  func(e *env) error
		want    contract.Reason
	}{
		{"pod deleted", podBinding(), func(e *env) error {
			return e.client.CoreV1().Pods("wirekube-system").Delete(ctx, "agent-a", del)
		}, contract.ReasonPodNotFound},
		{"pod replaced", podBinding(), func(e *env) error {
			return replacePod(ctx, e, "node-a")
		}, contract.ReasonPodUIDMismatch},
		{"service account deleted", podBinding(), func(e *env) error {
			return e.client.CoreV1().ServiceAccounts("wirekube-system").Delete(ctx, "wirekube-agent", del)
		}, contract.ReasonServiceAccountNotFound},
		{"node deleted", nodeBinding(), func(e *env) error {
			return e.client.CoreV1().Nodes().Delete(ctx, "node-a", del)
		}, contract.ReasonNodeMismatch},
		{"peer deleted", podBinding(), func(e *env) error {
			return e.dyn.Resource(PeerGVR).Delete(ctx, "node-a", del)
		}, contract.ReasonPeerNotFound},
		{"peer key rotated", peerSABinding(), func(e *env) error {
			_, err := e.dyn.Resource(PeerGVR).Update(ctx, peerObject("node-b", "CAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAg="), metav1.UpdateOptions{})
			return err
		}, contract.ClosePeerKeyChanged},
		{"pod-bound agent, its node deleted", podBinding(), func(e *env) error {
			return e.client.CoreV1().Nodes().Delete(ctx, "node-a", del)
		}, contract.ReasonNodeMismatch},
		{"pod-bound agent naming no node, the pod's node deleted", podNoNodeBinding(), func(e *env) error {
			return e.client.CoreV1().Nodes().Delete(ctx, "node-a", del)
		}, contract.ReasonNodeMismatch},
		{"per-peer pod-bound, pod deleted", peerPodBinding(), func(e *env) error {
			return e.client.CoreV1().Pods("wirekube-system").Delete(ctx, "peer-b-pod", del)
		}, contract.ReasonPodNotFound},
		{"per-peer pod-bound, node deleted", peerPodBinding(), func(e *env) error {
			return e.client.CoreV1().Nodes().Delete(ctx, "node-a", del)
		}, contract.ReasonNodeMismatch},
		{"pod succeeded", podBinding(), func(e *env) error {
			return setPodPhase(ctx, e, "agent-a", corev1.PodSucceeded)
		}, contract.ReasonPodTerminated},
		{"per-peer pod-bound, pod failed", peerPodBinding(), func(e *env) error {
			return setPodPhase(ctx, e, "peer-b-pod", corev1.PodFailed)
		}, contract.ReasonPodTerminated},
		{"per-peer service account deleted", peerSABinding(), func(e *env) error {
			return e.client.CoreV1().ServiceAccounts("wirekube-system").Delete(ctx, "wirekube-relay-peer-node-b", del)
		}, contract.ReasonServiceAccountNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			if r := e.authz.Rejudge(tc.binding); r != "" {
				t.Fatalf("before the change: %s", r)
			}
			must(t, tc.change(e))
			testutil.Eventually(t, string(tc.want), func() bool { return e.authz.Rejudge(tc.binding) == tc.want })
		})
	}
}

// setPodPhase moves a Pod to phase through the status subresource, as the
// kubelet does.
func setPodPhase(ctx context.Context, e *env, name string, phase corev1.PodPhase) error {
	pods := e.client.CoreV1().Pods("wirekube-system")
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pod.Status.Phase = phase
	_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}

func replacePod(ctx context.Context, e *env, node string) error {
	pods := e.client.CoreV1().Pods("wirekube-system")
	if err := pods.Delete(ctx, "agent-a", metav1.DeleteOptions{}); err != nil {
		return err
	}
	_, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "wirekube-system", Name: "agent-a", UID: types.UID("uid-pod-a2")},
		Spec:       corev1.PodSpec{ServiceAccountName: "wirekube-agent", NodeName: node},
	}, metav1.CreateOptions{})
	return err
}

// TestRejudgeConfig: the same binding no longer holds under a narrower
// configuration (extauthz restarted without that identity).
func TestRejudgeConfig(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.AgentServiceAccounts = []string{"wirekube-system/other-agent"} })
	if r := e.authz.Rejudge(podBinding()); r != contract.ReasonIdentityNotAllowed {
		t.Fatalf("Rejudge = %q, want identity_not_allowed", r)
	}
	if r := e.authz.Rejudge(peerSABinding()); r != "" {
		t.Fatalf("per-peer binding: %q", r)
	}
}

// revocationClient is the bridge end of a real gRPC Watch stream.
type revocationClient struct {
	t      testing.TB
	stream grpc.ClientStream
	hub    *revocationhub.Hub
}

// hubServer is a hub served on a Unix socket as Run serves it
// (revocationhub.NewServer: the secret, the fixed windows, reflection).
type hubServer struct {
	hub        *revocationhub.Hub
	reg        *prometheus.Registry
	sock       string
	secretFile string
}

// newHub is the hub Run builds, judging with e's Authorizer over e.live.
func newHub(e *env, reg prometheus.Registerer, log *slog.Logger) (*revocationhub.Hub, error) {
	return revocationhub.New(revocationhub.Deps{Judge: e.authz, Events: e.authz.events, Limits: e.authz.cfg.revocation,
		Live: e.live, Reg: reg, Log: log})
}

func serveHub(t testing.TB, e *env) *hubServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	hub, err := newHub(e, reg, slog.New(slog.NewJSONHandler(suiteLog, nil)))
	must(t, err)
	must(t, e.in.OnChange(e.live.Notify))
	hub.MarkSynced()
	dir := t.TempDir()
	o := e.authz.cfg.revocation
	o.RevocationListen, o.RevocationSecretFile = "unix:"+filepath.Join(dir, "revocation.sock"), filepath.Join(dir, "secret")
	ln, secret, err := revocationhub.Listen(o)
	must(t, err)
	gs := revocationhub.NewServer(hub, secret)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(ln) }()
	t.Cleanup(func() {
		hub.Shutdown()
		gs.Stop()
		<-served
	})
	return &hubServer{hub: hub, reg: reg, sock: filepath.Join(dir, "revocation.sock"), secretFile: o.RevocationSecretFile}
}

// dial connects as the bridge does: the socket, the secret file read per
// call.
func (s *hubServer) dial(t testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix:"+s.sock, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(revocation.SecretCredentials{Path: s.secretFile})}, opts...)...)
	must(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (s *hubServer) open(t testing.TB, conn *grpc.ClientConn) *revocationClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := conn.NewStream(ctx, &revocation.StreamDesc, revocation.WatchMethod)
	must(t, err)
	return &revocationClient{t: t, stream: stream, hub: s.hub}
}

func startRevocation(t testing.TB, e *env) *revocationClient {
	t.Helper()
	s := serveHub(t, e)
	return s.open(t, s.dial(t))
}

func (c *revocationClient) send(ops ...revocation.Op) {
	c.t.Helper()
	must(c.t, revocation.Send(c.stream, ops))
}

// until receives ops until one of kind SyncedAck with id gen arrives and
// returns the revocations before it.
func (c *revocationClient) until(gen uint64) map[uint64]revocation.Op {
	c.t.Helper()
	got := map[uint64]revocation.Op{}
	for {
		ops, err := revocation.RecvFromExtauthz(c.stream)
		must(c.t, err)
		for _, op := range ops {
			if op.Kind == revocation.KindSyncedAck && op.ID == gen {
				return got
			}
			got[op.ID] = op
		}
	}
}

func (c *revocationClient) next() revocation.Op {
	c.t.Helper()
	ops, err := revocation.RecvFromExtauthz(c.stream)
	must(c.t, err)
	if len(ops) != 1 {
		c.t.Fatalf("got %d ops, want 1: %+v", len(ops), ops)
	}
	return ops[0]
}

// TestRevocationStream: the full list is judged at once (invalid bindings
// revoked before the ack), then a Pod deletion revokes exactly its session
// and the sentinel sessions stay.
func TestRevocationStream(t *testing.T) {
	e := newEnv(t, nil)
	c := startRevocation(t, e)
	stale := podBinding()
	stale.PodUID = "uid-pod-gone"
	c.send(
		revocation.Op{Kind: revocation.KindAdd, ID: 1, Binding: podBinding().Format()},
		revocation.Op{Kind: revocation.KindAdd, ID: 2, Binding: peerSABinding().Format()},
		revocation.Op{Kind: revocation.KindAdd, ID: 3, Binding: stale.Format()},
		revocation.Op{Kind: revocation.KindAdd, ID: 4, Binding: "v9;garbage"},
		revocation.Op{Kind: revocation.KindAdd, ID: 5, Binding: nodeBinding().Format()},
		revocation.Op{Kind: revocation.KindRemove, ID: 5},
		revocation.Op{Kind: revocation.KindSynced, ID: 1},
	)
	got := c.until(1)
	if len(got) != 2 || got[3].Reason != string(contract.ReasonPodUIDMismatch) || got[4].Reason != string(contract.CloseRevoked) {
		t.Fatalf("revocations after the list: %+v", got)
	}
	start := time.Now()
	must(t, e.client.CoreV1().Pods("wirekube-system").Delete(context.Background(), "agent-a", metav1.DeleteOptions{}))
	op := c.next()
	if op.Kind != revocation.KindRevoke || op.ID != 1 || op.Reason != string(contract.ReasonPodNotFound) ||
		op.EventUnixNano < start.UnixNano() {
		t.Fatalf("after the delete: %+v", op)
	}
	// Node events reach no remaining binding (5 was removed): the next op is
	// the ack, so 2 is still held.
	must(t, e.client.CoreV1().Nodes().Delete(context.Background(), "node-a", metav1.DeleteOptions{}))
	c.send(revocation.Op{Kind: revocation.KindSynced, ID: 2})
	if got := c.until(2); len(got) != 0 {
		t.Fatalf("sentinel revoked: %+v", got)
	}
}

// TestKeySquatting: node-b's WireKubePeer takes node-a's key (any agent may
// write any WireKubePeer). node-a's live binding, which names no object
// node-b's change touched, is revoked with peer_key_duplicate through the
// key index, node-b's too; both are refused at the next check, and the
// duplicate-key gauge counts the key.
func TestKeySquatting(t *testing.T) {
	e := newEnv(t, nil)
	c := startRevocation(t, e)
	c.send(
		revocation.Op{Kind: revocation.KindAdd, ID: 1, Binding: podBinding().Format()},
		revocation.Op{Kind: revocation.KindAdd, ID: 2, Binding: peerSABinding().Format()},
		revocation.Op{Kind: revocation.KindSynced, ID: 1},
	)
	if got := c.until(1); len(got) != 0 {
		t.Fatalf("revoked before the change: %+v", got)
	}
	if n := duplicateGauge(t, e); n != 1 { // node-m and node-gone share a key in the fixtures
		t.Fatalf("peer_keys_duplicate = %v before, want 1", n)
	}
	_, err := e.dyn.Resource(PeerGVR).Update(context.Background(), peerObject("node-b", peerKeyB64), metav1.UpdateOptions{})
	must(t, err)
	got := map[uint64]string{}
	for len(got) < 2 {
		ops, err := revocation.RecvFromExtauthz(c.stream)
		must(t, err)
		for _, op := range ops {
			got[op.ID] = op.Reason
		}
	}
	want := string(contract.ReasonPeerKeyDuplicate)
	if got[1] != want || got[2] != want {
		t.Fatalf("revocations after node-b took node-a's key: %v, want both %s", got, want)
	}
	if n := duplicateGauge(t, e); n != 2 {
		t.Errorf("peer_keys_duplicate = %v after, want 2", n)
	}
	tok := e.tokens()
	for _, id := range []string{"agent-pod", "peer-sa"} {
		wantReason(t, e.check(t, tok[id]), contract.ReasonPeerKeyDuplicate)
	}
}

func duplicateGauge(t *testing.T, e *env) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "wirekube_extauthz_peer_keys_duplicate" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no wirekube_extauthz_peer_keys_duplicate")
	return 0
}
