//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/tools/probe"
)

// testSessionListing: scenario 12. Two agents connected through f are
// exactly the listing's sessions of their peers, read by
// `wirekube-relay-probe sessions` through the real kube-apiserver's Pod
// proxy; once one closes it is gone from the bridge's listing.
//
// No kubelet runs here, but the Pod proxy does not need one: the API
// server dials the Pod's status.podIP itself, and refuses any address that
// is not global unicast (loopback included). So the test writes a gateway
// Pod whose status names this host's global unicast address, and forwards
// that address's port to the bridge's loopback metrics listener.
func (e *env) testSessionListing(t *testing.T, f front) {
	a := e.podAgent(t, peerName(f, "s12-a"))
	b := e.podAgent(t, peerName(f, "s12-b"))
	ca := session(t, f, a)
	cb := session(t, f, b)
	selector := e.gatewayPod(t, f)
	prefix := peerName(f, "s12-")
	const sa = "system:serviceaccount:" + stack.Namespace + ":" + agentSA

	rep := e.probeSessions(t, selector)
	if len(rep.Pods) != 1 || rep.Pods[0].Error != "" {
		t.Fatalf("pods %+v, want one listed gateway Pod", rep.Pods)
	}
	var got []string
	for _, s := range rep.Pods[0].Sessions {
		if strings.HasPrefix(s.Peer, prefix) {
			got = append(got, s.Peer+" "+s.Identity+" "+s.Key)
			if s.RequestID == "" || s.BytesToRelay == 0 || s.BytesToClient == 0 {
				t.Errorf("session %+v: want the front's request id and the echo counted both ways", s)
			}
		}
	}
	want := []string{a.peer + " " + sa + " " + fingerprint(a.key), b.peer + " " + sa + " " + fingerprint(b.key)}
	if !slices.Equal(got, want) {
		t.Fatalf("listed through the Pod proxy: %q, want %q", got, want)
	}

	cb.Close()
	waitGone(t, e.stack.BridgeMetrics, b.peer)
	rep = e.probeSessions(t, selector, "--peer", a.peer)
	if rep.Sessions != 1 || rep.Pods[0].Sessions[0].Key != fingerprint(a.key) {
		t.Fatalf("after b closed, --peer %s: %+v, want a's one session", a.peer, rep)
	}
	if rep = e.probeSessions(t, selector, "--peer", b.peer); rep.Sessions != 0 {
		t.Fatalf("after b closed, --peer %s: %+v, want none", b.peer, rep)
	}
	e.checkEveryPeer(t, selector, a.peer, b.peer)
	alive(t, ca, a.key)
}

// checkEveryPeer: with both peers labelled as WireKube's agent labels its
// own (wirekube.io/node), `sessions --every-peer` lists them through the
// real API server and names without (b, closed) but not with (a, live):
// exit 11. Peers of other fronts may be named too; these two decide.
func (e *env) checkEveryPeer(t *testing.T, selector, with, without string) {
	t.Helper()
	for _, p := range []string{with, without} {
		patch := []byte(`{"metadata":{"labels":{"wirekube.io/node":"` + p + `"}}}`)
		_, err := e.cluster.Dynamic.Resource(stack.PeerGVR).Patch(context.Background(), p, types.MergePatchType, patch, metav1.PatchOptions{})
		fatalIf(t, err)
	}
	var out, errOut strings.Builder
	err := probe.Command(context.Background(), []string{"sessions", "--kubeconfig", e.cluster.AdminKubeconfig, "-n", stack.Namespace,
		"--selector", selector, "-o", "json", "--every-peer"}, &out, &errOut)
	var rep probe.SessionsReport
	if code := probe.ExitCode(err); code != probe.ExitPeersWithoutSession || json.Unmarshal([]byte(out.String()), &rep) != nil || rep.EveryPeer == nil {
		t.Fatalf("--every-peer: exit %d (%v), want 11\n%s\n%s", code, err, errOut.String(), out.String())
	}
	missing := rep.EveryPeer.WithoutSession
	if !slices.Contains(missing, without) || slices.Contains(missing, with) || rep.EveryPeer.AgentPeers < 2 {
		t.Fatalf("--every-peer: %d agent peers, without a session %q; want %s named and %s not", rep.EveryPeer.AgentPeers, missing, without, with)
	}
}

// fingerprint is the first 8 hex digits of the key's SHA-256.
func fingerprint(k [32]byte) string {
	sum := sha256.Sum256(k[:])
	return hex.EncodeToString(sum[:])[:8]
}

// probeSessions runs `wirekube-relay-probe sessions -o json` with the
// admin kubeconfig against the Pods of selector.
func (e *env) probeSessions(t *testing.T, selector string, args ...string) probe.SessionsReport {
	t.Helper()
	var out, errOut strings.Builder
	args = append([]string{"sessions", "--kubeconfig", e.cluster.AdminKubeconfig, "-n", stack.Namespace,
		"--selector", selector, "-o", "json"}, args...)
	if err := probe.Command(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("probe sessions: exit %d: %v\n%s\n%s", probe.ExitCode(err), err, errOut.String(), out.String())
	}
	var rep probe.SessionsReport
	fatalIf(t, json.Unmarshal([]byte(out.String()), &rep))
	return rep
}

// waitGone waits until the bridge lists no session of peer.
func waitGone(t *testing.T, metrics, peer string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + metrics + contract.SessionsPath + "?peer=" + peer)
		fatalIf(t, err)
		var l contract.SessionList
		err = json.NewDecoder(resp.Body).Decode(&l)
		resp.Body.Close()
		fatalIf(t, err)
		if len(l.Sessions) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still listed 10 s after its close: %+v", peer, l.Sessions)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gatewayPod writes a Running gateway Pod (the manifests' label and port
// name) whose IP is this host's global unicast address, and forwards its
// port to the bridge's metrics listener. It returns the Pods' selector.
func (e *env) gatewayPod(t *testing.T, f front) string {
	t.Helper()
	ip := globalUnicast(t)
	port := forward(t, ip, e.stack.BridgeMetrics)
	ctx := context.Background()
	pods := e.cluster.Client.CoreV1().Pods(stack.Namespace)
	pod, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gateway-" + f.name, Labels: map[string]string{
			"app.kubernetes.io/name": "wirekube-relay-gateway", "e2e-front": f.name}},
		Spec: corev1.PodSpec{ServiceAccountName: "wirekube-other", AutomountServiceAccountToken: new(false), Containers: []corev1.Container{{
			Name: "bridge", Image: "wirekube-relay-ws:e2e",
			Ports: []corev1.ContainerPort{{Name: "bridge-metrics", ContainerPort: int32(port)}}}}},
	}, metav1.CreateOptions{})
	fatalIf(t, err)
	t.Cleanup(func() { _ = e.cluster.DeletePodNow(context.Background(), stack.Namespace, pod.Name) })
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	fatalIf(t, err)
	return "app.kubernetes.io/name=wirekube-relay-gateway,e2e-front=" + f.name
}

// globalUnicast is an IPv4 address of this host that the API server's Pod
// proxy accepts (not loopback, not link-local).
func globalUnicast(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	fatalIf(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatalf("no global unicast IPv4 address on this host (%v): the Pod proxy test needs one", addrs)
	return ""
}

// forward accepts on ip (a fresh port) and copies each connection to and
// from target until the test ends. It returns the port.
func forward(t *testing.T, ip, target string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	fatalIf(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(u, c); u.(*net.TCPConn).CloseWrite() })
			wg.Go(func() { _, _ = io.Copy(c, u); c.(*net.TCPConn).CloseWrite() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	port, err := strconv.Atoi(p)
	fatalIf(t, err)
	return port
}
