//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/render"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testagent"
	"github.com/wirekube/relay-ws/relayproto"
)

// Timing knobs of the stack under test: short enough to test in seconds.
const (
	registerTimeout = 2 * time.Second
	drainTimeout    = 3 * time.Second
	agentSA         = "wirekube-agent"
	peerSAPrefix    = "wirekube-relay-peer-"
)

// env is the whole running system of one suite run.
type env struct {
	repo    string
	runDir  string
	procs   *stack.Procs
	cluster *stack.Cluster
	stack   *stack.Stack
	bins    map[string]string // the repository binaries, by name
	fronts  []front

	extauthzSA             string
	extauthzKubeconfigPath string

	mu     sync.Mutex
	tokens []string // every token the run used, for the log scan
	keys   []relayproto.Key
}

// front is one proxy in front of the bridge.
type front struct {
	name string
	url  string // wss://127.0.0.1:port/relay
	base string // https://127.0.0.1:port
	tls  *tls.Config
}

// newEnv builds and starts everything; t.Cleanup stops every process by PID
// and keeps the logs when the test failed.
func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	repo, err := stack.RepoRoot()
	fatalIf(t, err)
	runDir, err := os.MkdirTemp("", "wirekube-e2e-")
	fatalIf(t, err)
	procs, err := stack.NewProcs(filepath.Join(runDir, "logs"), testWriter{t})
	fatalIf(t, err)
	e := &env{repo: repo, runDir: runDir, procs: procs}
	t.Cleanup(func() { e.close(t) })

	bins, err := stack.FindKubeBinaries(ctx, repo, testWriter{t})
	fatalIf(t, err)
	e.cluster, err = stack.StartCluster(ctx, procs, bins, filepath.Join(runDir, "cluster"))
	fatalIf(t, err)
	fatalIf(t, e.seedCluster(ctx))
	repoBins, err := stack.BuildRepoBinaries(ctx, repo, filepath.Join(runDir, "bin"), testWriter{t})
	fatalIf(t, err)
	e.bins = repoBins
	kubeconfig, err := e.extauthzKubeconfig(ctx)
	fatalIf(t, err)
	e.stack, err = stack.StartStack(ctx, procs, stack.StackOptions{
		RepoRoot: repo, Dir: filepath.Join(runDir, "stack"), Bins: repoBins,
		ExtauthzKubeconfig: kubeconfig,
		BridgeArgs: []string{
			"--register-timeout=" + registerTimeout.String(), "--drain-timeout=" + drainTimeout.String(),
			"--debug-sessions", // scenario 12
		},
	})
	fatalIf(t, err)
	tlsConf := &tls.Config{RootCAs: e.stack.FrontCA.Pool(), MinVersion: tls.VersionTLS12}
	e.fronts = []front{
		{name: "nginx", url: "wss://" + e.stack.NginxAddr + "/relay", base: "https://" + e.stack.NginxAddr, tls: tlsConf},
		{name: e.stack.GRPCFront, url: "wss://" + e.stack.StandinAddr + "/relay", base: "https://" + e.stack.StandinAddr, tls: tlsConf},
	}
	return e
}

func (e *env) close(t *testing.T) {
	if e.stack != nil {
		e.stack.Close()
	}
	if err := e.procs.Close(); err != nil {
		t.Errorf("stopping processes: %v", err)
	}
	if t.Failed() || os.Getenv("WIREKUBE_E2E_KEEP") != "" {
		t.Logf("logs of every process are kept in %s", e.procs.LogDir)
		return
	}
	os.RemoveAll(e.runDir)
}

// seedCluster installs the CRD fixtures and the objects every scenario
// shares.
func (e *env) seedCluster(ctx context.Context) error {
	crds, err := render.CRDs()
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if err := e.cluster.InstallCRD(ctx, crd.Data); err != nil {
			return err
		}
	}
	for _, ns := range []string{stack.Namespace, "wirekube-elsewhere"} {
		if err := e.cluster.EnsureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	for _, sa := range []struct{ ns, name string }{
		{stack.Namespace, agentSA}, {stack.Namespace, "wirekube-other"}, {"wirekube-elsewhere", agentSA},
	} {
		if _, err := e.cluster.CreateServiceAccount(ctx, sa.ns, sa.name); err != nil {
			return err
		}
	}
	return nil
}

// extauthzKubeconfig applies manifests/base's ServiceAccount and RBAC and
// returns a kubeconfig for it (stack.Cluster.ExtauthzKubeconfig), keeping
// its name and path and tracking its token for the log scans.
func (e *env) extauthzKubeconfig(ctx context.Context) (string, error) {
	path, sa, token, err := e.cluster.ExtauthzKubeconfig(ctx, e.repo)
	if err != nil {
		return "", err
	}
	e.extauthzSA = sa
	e.extauthzKubeconfigPath = path
	e.track(token)
	return path, nil
}

// identity is an agent credential and the key it may register.
type identity struct {
	peer      string // WireKubePeer (and node) name
	key       relayproto.Key
	token     string
	tokenFile string
	pod       *corev1.Pod
	sa        *corev1.ServiceAccount
}

func (e *env) track(token string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tokens = append(e.tokens, token)
	return token
}

func (e *env) newKey(t *testing.T) relayproto.Key {
	t.Helper()
	var k relayproto.Key
	rand.Read(k[:])
	e.mu.Lock()
	e.keys = append(e.keys, k)
	e.mu.Unlock()
	return k
}

func (e *env) writeTokenFile(t *testing.T, name, token string) string {
	t.Helper()
	p := filepath.Join(e.runDir, "tokens", name)
	fatalIf(t, os.MkdirAll(filepath.Dir(p), 0o700))
	// A trailing newline, as some tools write: the agent trims whitespace.
	fatalIf(t, os.WriteFile(p, []byte(token+"\n"), 0o600))
	return p
}

func (e *env) tokenFor(t *testing.T, ns, sa string, o stack.TokenOptions) string {
	t.Helper()
	if o.Audience == "" {
		o.Audience = contract.DefaultAudience
	}
	if o.Duration == 0 {
		o.Duration = time.Hour
	}
	tok, err := e.cluster.Token(context.Background(), ns, sa, o)
	fatalIf(t, err)
	return e.track(tok)
}

// podAgent: a Node, an agent Pod on it, the node's WireKubePeer and a
// Pod-bound token, as the DaemonSet's projected token is.
func (e *env) podAgent(t *testing.T, peer string) identity {
	t.Helper()
	ctx := context.Background()
	_, err := e.cluster.CreateNode(ctx, peer)
	fatalIf(t, err)
	pod, err := e.cluster.CreatePod(ctx, stack.Namespace, "agent-"+peer, agentSA, peer)
	fatalIf(t, err)
	id := identity{peer: peer, key: e.newKey(t), pod: pod}
	fatalIf(t, e.cluster.CreatePeer(ctx, peer, id.key.Base64()))
	bound := stack.TokenOptions{BoundKind: "Pod", BoundName: pod.Name, BoundUID: string(pod.UID)}
	id.token = e.tokenFor(t, stack.Namespace, agentSA, bound)
	id.tokenFile = e.writeTokenFile(t, peer, id.token)
	e.waitPeerSeen(t, id, agentSA, bound)
	return id
}

// nodeAgent: a Node, its WireKubePeer and a Node-bound agent token.
func (e *env) nodeAgent(t *testing.T, peer string) identity {
	t.Helper()
	ctx := context.Background()
	node, err := e.cluster.CreateNode(ctx, peer)
	fatalIf(t, err)
	id := identity{peer: peer, key: e.newKey(t)}
	fatalIf(t, e.cluster.CreatePeer(ctx, peer, id.key.Base64()))
	bound := stack.TokenOptions{BoundKind: "Node", BoundName: node.Name, BoundUID: string(node.UID)}
	id.token = e.tokenFor(t, stack.Namespace, agentSA, bound)
	id.tokenFile = e.writeTokenFile(t, peer, id.token)
	e.waitPeerSeen(t, id, agentSA, bound)
	return id
}

// peerSAIdentity: a dedicated ServiceAccount wirekube-relay-peer-<peer> and,
// when withPeer, the WireKubePeer with key (nil: a fresh valid key).
func (e *env) peerSAIdentity(t *testing.T, peer string, withPeer bool, rawKey string) identity {
	t.Helper()
	ctx := context.Background()
	sa, err := e.cluster.CreateServiceAccount(ctx, stack.Namespace, peerSAPrefix+peer)
	fatalIf(t, err)
	id := identity{peer: peer, key: e.newKey(t), sa: sa}
	if withPeer {
		if rawKey == "" {
			rawKey = id.key.Base64()
		}
		fatalIf(t, e.cluster.CreatePeer(ctx, peer, rawKey))
	}
	id.token = e.tokenFor(t, stack.Namespace, sa.Name, stack.TokenOptions{})
	id.tokenFile = e.writeTokenFile(t, peer, id.token)
	if withPeer {
		e.waitPeerSeen(t, id, sa.Name, stack.TokenOptions{})
	}
	return id
}

// opts are the agent options for id through f, as the real agent dials.
func (f front) opts(id identity) testagent.Options {
	return testagent.Options{URL: f.url, TokenFile: id.tokenFile, TLS: f.tls}
}

// peerName makes a per-front, per-scenario unique peer (and node) name.
func peerName(f front, s string) string {
	short := map[string]string{"nginx": "ng", "envoy-standin": "es", "envoy": "ev"}[f.name]
	return strings.ToLower(short + "-" + s)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func fatalIf(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
