//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/tools/probe"
)

// runProbe runs wirekube-relay-probe in-process with --output json and
// returns its exit code and report; a token in the report fails the test.
func (e *env) runProbe(t *testing.T, args ...string) (int, probe.Result) {
	t.Helper()
	code, res, err := e.probeReport(args...)
	if err != nil {
		t.Fatal(err)
	}
	return code, res
}

// probeReport is runProbe for a goroutine: an error instead of t.Fatal (a
// token in the output, or output that is not a JSON report).
func (e *env) probeReport(args ...string) (int, probe.Result, error) {
	var out, errb bytes.Buffer
	err := probe.Command(context.Background(), append(args, "--output", "json", "--timeout", "5s"), &out, &errb)
	e.mu.Lock()
	tokens := append([]string(nil), e.tokens...)
	e.mu.Unlock()
	for _, tok := range tokens {
		if bytes.Contains(out.Bytes(), []byte(tok)) || bytes.Contains(errb.Bytes(), []byte(tok)) {
			return 0, probe.Result{}, errors.New("the probe printed a token")
		}
	}
	var res probe.Result
	if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
		return 0, res, fmt.Errorf("probe output is not JSON (%v, exit %d): %s %s", jerr, probe.ExitCode(err), out.String(), errb.String())
	}
	return probe.ExitCode(err), res, nil
}

func (e *env) frontCAFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(e.runDir, "front-ca.pem")
	fatalIf(t, os.WriteFile(p, e.stack.FrontCA.CertPEM, 0o644))
	return p
}

// testProbe: the probe against the real stack, for success and for each
// failure an operator can meet with real credentials.
func (e *env) testProbe(t *testing.T, f front) {
	ca := e.frontCAFile(t)
	good := e.podAgent(t, peerName(f, "probe-ok"))
	noPeer := e.peerSAIdentity(t, peerName(f, "probe-nopeer"), false, "")
	wrongAud := e.writeTokenFile(t, "probe-wrong-aud", e.tokenFor(t, stack.Namespace, agentSA,
		stack.TokenOptions{Audience: "https://kubernetes.default.svc.cluster.local", BoundKind: "Pod",
			BoundName: good.pod.Name, BoundUID: string(good.pod.UID)}))
	garbage := e.writeTokenFile(t, "probe-garbage", e.track("not-a-jwt-"+peerName(f, "probe")))
	inURL := f.url + "?access_token=" + url.QueryEscape(good.token)
	otherKey := e.newKey(t)

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		reason contract.Reason
	}{
		{"ok", []string{"--url", f.url, "--token-file", good.tokenFile, "--public-key", good.key.Base64(), "--ca-file", ca}, probe.ExitOK, ""},
		{"ok_register", []string{"--url", f.url, "--token-file", good.tokenFile, "--public-key", good.key.Base64(), "--ca-file", ca, "--register"}, probe.ExitOK, ""},
		{"no_token", []string{"--url", f.url, "--token-file", "", "--public-key", good.key.Base64(), "--ca-file", ca}, probe.ExitDenied401, contract.ReasonTokenMissing},
		{"garbage_token", []string{"--url", f.url, "--token-file", garbage, "--public-key", good.key.Base64(), "--ca-file", ca}, probe.ExitDenied401, contract.ReasonTokenMalformed},
		{"wrong_audience", []string{"--url", f.url, "--token-file", wrongAud, "--public-key", good.key.Base64(), "--ca-file", ca}, probe.ExitDenied401, contract.ReasonAudienceMismatch},
		{"token_in_url", []string{"--url", inURL, "--token-file", good.tokenFile, "--public-key", good.key.Base64(), "--ca-file", ca}, probe.ExitRejected, contract.ReasonTokenInURL},
		{"peer_not_found", []string{"--url", f.url, "--token-file", noPeer.tokenFile, "--public-key", noPeer.key.Base64(), "--ca-file", ca}, probe.ExitDenied403, contract.ReasonPeerNotFound},
		// Check mode: the mismatch is no backoff strike.
		{"key_mismatch", []string{"--url", f.url, "--token-file", good.tokenFile, "--public-key", otherKey.Base64(), "--ca-file", ca}, probe.ExitClosed, contract.CloseRegisterKeyMismatch},
		// After this one the bridge refuses the identity before the upgrade
		// for its backoff window (403 register_key_mismatch).
		{"key_mismatch_register", []string{"--url", f.url, "--token-file", good.tokenFile, "--public-key", otherKey.Base64(), "--ca-file", ca, "--register"}, probe.ExitClosed, contract.CloseRegisterKeyMismatch},
		{"untrusted_ca", []string{"--url", f.url, "--token-file", good.tokenFile, "--public-key", good.key.Base64()}, probe.ExitTLS, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, res := e.runProbe(t, tc.args...)
			if code != tc.code || res.Reason != string(tc.reason) {
				t.Fatalf("exit %d reason %q, want exit %d reason %q; report %+v", code, res.Reason, tc.code, tc.reason, res)
			}
			if code != probe.ExitOK && res.Fix == "" {
				t.Errorf("no fix printed")
			}
			last := res.Stages[len(res.Stages)-1]
			switch {
			case code != probe.ExitOK:
			case res.Mode == probe.ModeRegister && (last.Echo == nil || last.Echo.Received != probe.DefaultCount):
				t.Errorf("echo stage %+v, want %d round trips", last, probe.DefaultCount)
			case res.Mode == probe.ModeCheck && last.Status != probe.StatusSkipped:
				t.Errorf("check mode ran an echo: %+v", last)
			}
		})
	}
	// After the probe's sessions, the real agent still connects with its key.
	live := session(t, f, good)
	t.Run("check_leaves_the_live_agent_alone", func(t *testing.T) {
		args := []string{"--url", f.url, "--token-file", good.tokenFile, "--public-key", good.key.Base64(), "--ca-file", ca}
		code, res := e.runProbe(t, args...)
		if code != probe.ExitOK || res.Mode != probe.ModeCheck {
			t.Fatalf("probe: exit %d mode %q, want ok in check mode; report %+v", code, res.Mode, res)
		}
		// Had the relay seen a Register for the key, it would have replaced
		// (closed) the live session.
		alive(t, live, good.key)
	})
	live.Close()
	t.Run("service_account_gone", func(t *testing.T) { e.testProbeSAGone(t, f, ca) })
}

// testProbeSAGone: a per-peer ServiceAccount whose review extauthz has
// cached is deleted; the probe reports 403 service_account_not_found (exit
// 6) well inside kube-apiserver's cache window.
func (e *env) testProbeSAGone(t *testing.T, f front, ca string) {
	id := e.peerSAIdentity(t, peerName(f, "probe-sagone"), true, "")
	args := []string{"--url", f.url, "--token-file", id.tokenFile, "--public-key", id.key.Base64(), "--ca-file", ca}
	if code, res := e.runProbe(t, args...); code != probe.ExitOK {
		t.Fatalf("before the deletion: exit %d %+v", code, res)
	}
	deleted := time.Now()
	fatalIf(t, e.cluster.DeleteServiceAccount(context.Background(), stack.Namespace, id.sa.Name))
	var code int
	var res probe.Result
	for time.Since(deleted) < apiserverCacheWindow-time.Second {
		if code, res = e.runProbe(t, args...); code == probe.ExitDenied403 && res.Reason == string(contract.ReasonServiceAccountNotFound) {
			t.Logf("probe: exit 6 service_account_not_found %s after the deletion", time.Since(deleted).Round(time.Millisecond))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("last probe: exit %d reason %q, want exit 6 service_account_not_found", code, res.Reason)
}
