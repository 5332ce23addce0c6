//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/tools/relaytoken"
)

// TestToolsE2E runs the operator tools (wirekube-relay-token and
// wirekube-relay-probe) against the real stack, through every front. It
// starts its own stack; testRelayTokenTool and testProbe have the scenario
// signature, so they can be moved into TestE2E's scenario list instead.
func TestToolsE2E(t *testing.T) {
	e := newEnv(t)
	for _, f := range e.fronts {
		t.Run(f.name, func(t *testing.T) {
			t.Run("relay_token", func(t *testing.T) { e.testRelayTokenTool(t, f) })
			t.Run("probe", func(t *testing.T) { e.testProbe(t, f) })
		})
	}
	t.Run("logs_contain_no_tool_token", e.testToolLogs)
}

// relayToken runs wirekube-relay-token in-process with the admin kubeconfig
// and fails if a token shows in its report (stdout is the report unless
// `--output -`, which no call here uses).
func (e *env) relayToken(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	args = append(args, "--kubeconfig", e.cluster.AdminKubeconfig)
	err := relaytoken.Command(context.Background(), args, &out, &errb)
	if err != nil {
		t.Fatalf("wirekube-relay-token %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	e.mu.Lock()
	tokens := append([]string(nil), e.tokens...)
	e.mu.Unlock()
	for _, tok := range tokens {
		if strings.Contains(out.String()+errb.String(), tok) {
			t.Fatalf("wirekube-relay-token printed a token")
		}
	}
	return out.String()
}

// testRelayTokenTool: issue -> the token connects through the gateway;
// issuing twice keeps one ServiceAccount; list shows it; revoke -> the next
// connection is refused at once.
func (e *env) testRelayTokenTool(t *testing.T, f front) {
	ctx := context.Background()
	peer := peerName(f, "tool-token")
	id := identity{peer: peer, key: e.newKey(t)}
	fatalIf(t, e.cluster.CreatePeer(ctx, peer, id.key.Base64()))
	id.tokenFile = filepath.Join(e.runDir, "tokens", peer+".tool")
	fatalIf(t, os.MkdirAll(filepath.Dir(id.tokenFile), 0o700))

	out := e.relayToken(t, "issue", "--peer", peer, "--token-file", id.tokenFile, "--duration", "1h")
	if !strings.Contains(out, "ServiceAccount "+stack.Namespace+"/"+peerSAPrefix+peer+" created") {
		t.Errorf("first issue:\n%s", out)
	}
	tok, err := os.ReadFile(id.tokenFile)
	fatalIf(t, err)
	e.track(strings.TrimSpace(string(tok)))
	if fi, err := os.Stat(id.tokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode: %v %v", fi.Mode(), err)
	}
	session(t, f, id).Close()

	secretName := peer + "-relay-token"
	out = e.relayToken(t, "issue", "--peer", peer, "--secret", secretName)
	if !strings.Contains(out, peerSAPrefix+peer+" exists") {
		t.Errorf("second issue:\n%s", out)
	}
	sec, err := e.cluster.Client.CoreV1().Secrets(stack.Namespace).Get(ctx, secretName, metav1.GetOptions{})
	fatalIf(t, err)
	e.track(string(sec.Data[relaytoken.SecretTokenKey]))
	sas, err := e.cluster.Client.CoreV1().ServiceAccounts(stack.Namespace).List(ctx,
		metav1.ListOptions{LabelSelector: relaytoken.LabelPeer + "=" + peer})
	fatalIf(t, err)
	if len(sas.Items) != 1 {
		t.Fatalf("%d ServiceAccounts for peer %s after issuing twice, want 1", len(sas.Items), peer)
	}
	secretID := identity{peer: peer, key: id.key, tokenFile: e.writeTokenFile(t, peer+".secret", string(sec.Data[relaytoken.SecretTokenKey]))}
	session(t, f, secretID).Close() // the TokenReview is now cached by extauthz

	out = e.relayToken(t, "list")
	for _, want := range []string{peerSAPrefix + peer, secretName} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}

	// revoke says live sessions are closed: hold one open across it.
	live := session(t, f, secretID)
	revoked := time.Now()
	out = e.relayToken(t, "revoke", "--peer", peer)
	if !strings.Contains(out, "deleted ServiceAccount") || !strings.Contains(out, "are closed within seconds") {
		t.Errorf("revoke:\n%s", out)
	}
	wantClose(t, live, websocket.ClosePolicyViolation, contract.ReasonServiceAccountNotFound, revocationBound)
	waitRefused(t, f.opts(id), http.StatusForbidden, contract.ReasonServiceAccountNotFound, revoked)
	waitRefused(t, f.opts(secretID), http.StatusForbidden, contract.ReasonServiceAccountNotFound, revoked)
}

// testToolLogs: no process log holds any token of this run.
func (e *env) testToolLogs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(e.procs.LogDir, "*"))
	fatalIf(t, err)
	e.mu.Lock()
	tokens := append([]string(nil), e.tokens...)
	e.mu.Unlock()
	if len(files) == 0 || len(tokens) == 0 {
		t.Fatalf("%d log files, %d tokens: nothing to scan", len(files), len(tokens))
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		fatalIf(t, err)
		for i, tok := range tokens {
			if tok != "" && bytes.Contains(b, []byte(tok)) {
				t.Errorf("%s contains token #%d", filepath.Base(name), i)
			}
		}
	}
}
