package demo

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testagent"
	"github.com/wirekube/relay-ws/relayproto"
	"github.com/wirekube/relay-ws/tools/probe"
)

// node is one demo Node: its agent Pod, its WireKubePeer with a real
// WireGuard key pair, and the agent's Pod-bound token, as the DaemonSet's
// projected token would be.
type node struct {
	name      string
	pod       *corev1.Pod
	key       relayproto.Key // public
	keyFile   string         // base64 private key, as `wg genkey` writes it
	pubFile   string
	tokenFile string
}

// newKeyPair makes a WireGuard key pair: a private key clamped as
// `wg genkey` does, and its public key derived the way the probe derives it
// from --private-key-file.
func newKeyPair(rnd io.Reader) (priv []byte, pub relayproto.Key, err error) {
	priv = make([]byte, relayproto.KeySize)
	if _, err := io.ReadFull(rnd, priv); err != nil {
		return nil, pub, fmt.Errorf("key pair: %w", err)
	}
	priv[0] &= 248
	priv[31] = (priv[31] & 127) | 64
	pub, err = probe.PublicFromPrivate(base64.StdEncoding.EncodeToString(priv))
	if err != nil {
		return nil, pub, fmt.Errorf("key pair: %w", err)
	}
	return priv, pub, nil
}

// addNode creates the Node, the agent Pod bound to it, the WireKubePeer
// named after it, and writes its key and token files into the state dir.
func (e *env) addNode(ctx context.Context, name string) (*node, error) {
	priv, pub, err := newKeyPair(rand.Reader)
	if err != nil {
		return nil, err
	}
	n := &node{name: name, key: pub}
	if n.keyFile, err = e.state.writeFile("keys/"+name+".key", []byte(base64.StdEncoding.EncodeToString(priv)+"\n"), 0o600); err != nil {
		return nil, err
	}
	if n.pubFile, err = e.state.writeFile("keys/"+name+".pub", []byte(pub.Base64()+"\n"), 0o644); err != nil {
		return nil, err
	}
	if _, err := e.cluster.CreateNode(ctx, name); err != nil {
		return nil, err
	}
	if n.pod, err = e.cluster.CreatePod(ctx, stack.Namespace, "agent-"+name, agentSA, name); err != nil {
		return nil, err
	}
	if err := e.cluster.CreatePeer(ctx, name, pub.Base64()); err != nil {
		return nil, err
	}
	tok, err := e.podToken(ctx, n, contract.DefaultAudience)
	if err != nil {
		return nil, err
	}
	// A trailing newline, as kubectl prints it: the agent trims whitespace.
	n.tokenFile, err = e.state.writeFile("tokens/"+name, []byte(tok+"\n"), 0o600)
	return n, err
}

// podToken issues a real token bound to n's agent Pod via TokenRequest.
func (e *env) podToken(ctx context.Context, n *node, audience string) (string, error) {
	return e.cluster.Token(ctx, stack.Namespace, agentSA, stack.TokenOptions{
		Audience: audience, Duration: tokenTTL,
		BoundKind: "Pod", BoundName: n.pod.Name, BoundUID: string(n.pod.UID),
	})
}

// agentOptions dial the front as n's agent does: its token file, the demo
// CA, keepalives as the real agent sends them.
func (e *env) agentOptions(n *node) testagent.Options {
	return testagent.Options{URL: e.url(), TokenFile: n.tokenFile, TLS: e.tls}
}

// addNodes creates the named nodes and records their files in where.
func (e *env) addNodes(ctx context.Context, where *Where, names ...string) ([]*node, string, error) {
	var out []*node
	for _, name := range names {
		n, err := e.addNode(ctx, name)
		if err != nil {
			return nil, "", err
		}
		out = append(out, n)
		where.TokenFiles = append(where.TokenFiles, n.tokenFile)
		where.KeyFiles = append(where.KeyFiles, n.keyFile)
	}
	return out, "Nodes, agent Pods (Pod-bound tokens) and WireKubePeers " + strings.Join(names, ", "), nil
}
