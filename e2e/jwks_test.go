//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testagent"
)

// checkDiscoveryRBAC: the ServiceAccount of manifests/base reads the issuer
// discovery documents extauthz verifies tokens with, through the default
// system:service-account-issuer-discovery binding alone (the manifests grant
// no non-resource URL; manifests/rbac_test.go says so).
func checkDiscoveryRBAC(t *testing.T, cs kubernetes.Interface) {
	for _, path := range []string{"/.well-known/openid-configuration", "/openid/v1/jwks"} {
		body, err := cs.Discovery().RESTClient().Get().AbsPath(path).DoRaw(context.Background())
		if err != nil || !strings.Contains(string(body), "{") {
			t.Errorf("GET %s as the extauthz ServiceAccount: %v, want the document", path, err)
		}
	}
}

// testLocalVerification: tokens refused by the signature and claim checks
// cost no TokenReview, through every front.
func (e *env) testLocalVerification(t *testing.T, f front) {
	sa, err := e.cluster.Client.CoreV1().ServiceAccounts(stack.Namespace).Get(context.Background(), agentSA, metaGet)
	fatalIf(t, err)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	fatalIf(t, err)
	now := time.Now()
	sign := func(o stack.SignedTokenOptions) string {
		o.ServiceAccount, o.Audience, o.IssuedAt, o.Expiry = sa, contract.DefaultAudience, now, now.Add(time.Hour)
		tok, err := e.cluster.SignToken(o)
		fatalIf(t, err)
		return e.track(tok)
	}
	for _, tc := range []struct {
		name   string
		token  string
		reason contract.Reason
	}{
		{"signed_by_another_key", sign(stack.SignedTokenOptions{Key: other}), contract.ReasonTokenSignatureInvalid},
		{"valid_signature_other_issuer", sign(stack.SignedTokenOptions{Issuer: "https://issuer.other.example"}), contract.ReasonTokenInvalid},
		{"forged_exp_only", e.track(forgedToken()), contract.ReasonTokenSignatureInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.tokenReviews(t)
			wantRefused(t, testagent.Options{URL: f.url, TLS: f.tls, Token: tc.token}, http.StatusUnauthorized, tc.reason)
			if n := e.tokenReviews(t) - before; n != 0 {
				t.Errorf("%d TokenReviews for a token refused locally, want 0", n)
			}
		})
	}
}

// forgedToken is the forged-token attacker's token: a random kid, a numeric exp and
// a random signature.
func forgedToken() string {
	enc := base64.RawURLEncoding
	sig := make([]byte, 256)
	_, _ = rand.Read(sig)
	hdr := fmt.Sprintf(`{"alg":"RS256","kid":%q}`, rand.Text())
	payload := fmt.Sprintf(`{"exp":%d}`, time.Now().Add(time.Hour).Unix())
	return enc.EncodeToString([]byte(hdr)) + "." + enc.EncodeToString([]byte(payload)) + "." + enc.EncodeToString(sig)
}

// faultOfflineAndRotation, with extauthz in verify-offline mode: (1) the
// kube-apiserver stopped, a fresh token is admitted offline and a forged one
// still refused; (2) the signing key rotated (kube-apiserver restarted with
// a second key), a token of the new key verifies after one refresh and an
// unused token of the old key still verifies; (3) the old key removed, its
// tokens are refused as badly signed once the keys are refreshed. extauthz
// is restored to the defaults at the end.
func (e *env) faultOfflineAndRotation(t *testing.T) {
	ctx := context.Background()
	offArgs := []string{"--on-review-unavailable=verify-offline", "--jwks-min-refresh-interval=1s"}
	fatalIf(t, e.stack.RestartExtauthz(ctx, offArgs))
	defer func() { fatalIf(t, e.stack.RestartExtauthz(ctx, nil)) }()
	off, old, drop, fresh := map[string]identity{}, map[string]identity{}, map[string]identity{}, map[string]identity{}
	for _, f := range e.fronts {
		off[f.name], old[f.name] = e.podAgent(t, peerName(f, "s7-off")), e.podAgent(t, peerName(f, "s7-old"))
		drop[f.name], fresh[f.name] = e.podAgent(t, peerName(f, "s7-drop")), e.podAgent(t, peerName(f, "s7-new"))
	}
	t.Run("api_stopped_verify_offline", func(t *testing.T) { e.offlinePhase(t, off) })
	t.Run("key_rotated", func(t *testing.T) { e.rotatedPhase(t, old, fresh) })
	// extauthz's own token is of the old key: give it one of the new key
	// before the old one goes.
	_, err := e.extauthzKubeconfig(ctx)
	fatalIf(t, err)
	fatalIf(t, e.stack.RestartExtauthz(ctx, offArgs))
	t.Run("old_key_removed", func(t *testing.T) { e.droppedPhase(t, drop, fresh) })
}

func (e *env) offlinePhase(t *testing.T, ids map[string]identity) {
	fatalIf(t, e.cluster.StopAPIServer())
	defer func() { fatalIf(t, e.cluster.StartAPIServer(context.Background())) }()
	for _, f := range e.fronts {
		t.Run(f.name, func(t *testing.T) {
			session(t, f, ids[f.name])
			wantRefused(t, testagent.Options{URL: f.url, TLS: f.tls, Token: e.track(forgedToken())},
				http.StatusUnauthorized, contract.ReasonTokenSignatureInvalid)
		})
	}
	if n := e.extauthzCounter(t, `wirekube_extauthz_offline_checks_total{result="allow"}`); n < float64(len(e.fronts)) {
		t.Errorf("offline allows counted %v, want >= %d", n, len(e.fronts))
	}
}

func (e *env) rotatedPhase(t *testing.T, old, fresh map[string]identity) {
	fatalIf(t, e.cluster.RotateSAKey(context.Background()))
	before := e.extauthzCounter(t, `wirekube_extauthz_jwks_refreshes_total{result="ok",trigger="unknown_kid"}`)
	for _, f := range e.fronts {
		t.Run(f.name, func(t *testing.T) {
			id := fresh[f.name]
			id.token = e.tokenFor(t, stack.Namespace, agentSA, stack.TokenOptions{
				BoundKind: "Pod", BoundName: id.pod.Name, BoundUID: string(id.pod.UID)})
			id.tokenFile = e.writeTokenFile(t, id.peer, id.token)
			fresh[f.name] = id
			session(t, f, id)          // the new key's token: one refresh
			session(t, f, old[f.name]) // an unused token of the old key
		})
	}
	if n := e.extauthzCounter(t, `wirekube_extauthz_jwks_refreshes_total{result="ok",trigger="unknown_kid"}`) - before; n != 1 {
		t.Errorf("%v JWKS refreshes for the new key id, want 1", n)
	}
}

func (e *env) droppedPhase(t *testing.T, drop, fresh map[string]identity) {
	fatalIf(t, e.cluster.DropOldSAKeys(context.Background()))
	for _, f := range e.fronts {
		t.Run(f.name, func(t *testing.T) {
			session(t, f, fresh[f.name])
			// A made-up key id makes extauthz refresh (at most once a
			// second here); from then on the old key is unknown.
			deadline := time.Now().Add(30 * time.Second)
			for {
				_, _ = testagent.DialRaw(context.Background(), testagent.Options{URL: f.url, TLS: f.tls, Token: e.track(forgedToken())})
				_, err := testagent.DialRaw(context.Background(), f.opts(drop[f.name]))
				var de *testagent.DialError
				if errors.As(err, &de) && de.Reason == string(contract.ReasonTokenSignatureInvalid) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("old-key token: %v, want 401 %s within 30s", err, contract.ReasonTokenSignatureInvalid)
				}
				time.Sleep(1100 * time.Millisecond)
			}
		})
	}
}

// extauthzCounter reads one sample of extauthz's /metrics (0 when absent).
func (e *env) extauthzCounter(t *testing.T, series string) float64 {
	t.Helper()
	_, port, err := net.SplitHostPort(e.stack.ExtauthzMetrics)
	fatalIf(t, err)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://127.0.0.1:" + port + "/metrics")
	fatalIf(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	fatalIf(t, err)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			fatalIf(t, err)
			return n
		}
	}
	return 0
}
