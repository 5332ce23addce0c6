package extauthz

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

func unixHTTPClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
}

func httpGet(t *testing.T, c *http.Client, path string) (int, string) {
	t.Helper()
	resp, err := c.Get("http://x" + path)
	must(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestRun starts the whole service on Unix sockets over fake clients whose
// Pod list blocks until released: health and /readyz must say not serving
// until the caches synced, then a real gRPC Check is allowed.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	opts.GRPCListen = "unix:" + filepath.Join(dir, "grpc.sock")
	opts.HTTPListen = "unix:" + filepath.Join(dir, "http.sock")
	opts.MetricsListen = "unix:" + filepath.Join(dir, "metrics.sock")
	opts.RevocationListen = "unix:" + filepath.Join(dir, "revocation.sock")
	opts.RevocationSecretFile = filepath.Join(dir, "secret")
	opts.IdentityKeysFile = filepath.Join(dir, "identity-keys")
	cfg, err := opts.Complete()
	must(t, err)
	kube := fake.NewSimpleClientset(fixtureObjects()...)
	release := make(chan struct{})
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release
		return false, nil, nil
	})
	tok := newToken(time.Now().Add(time.Hour))
	kube.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		if tr.Spec.Token != tok {
			return true, &authnv1.TokenReview{}, nil
		}
		return true, &authnv1.TokenReview{Status: podBound()}, nil
	})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{PeerGVR: "WireKubePeerList", MeshGVR: "WireKubeMeshList"}, peerObject("node-a", peerKeyB64))
	var logBuf testutil.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		c := NewClients(kube, dyn)
		c.Keys = newFakeDiscovery("test").fetch
		done <- Run(ctx, cfg, c, prometheus.NewRegistry(),
			slog.New(slog.NewJSONHandler(io.MultiWriter(suiteLog, &logBuf), nil)))
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	metricsC := unixHTTPClient(filepath.Join(dir, "metrics.sock"))
	testutil.Eventually(t, "metrics listener", func() bool {
		resp, err := metricsC.Get("http://x/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "grpc.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	assertHealth(t, hc, healthpb.HealthCheckResponse_NOT_SERVING)
	if code, _ := httpGet(t, metricsC, "/readyz"); code != 503 {
		t.Errorf("/readyz before sync = %d, want 503", code)
	}
	close(release)
	testutil.Eventually(t, "serving", func() bool {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: authServiceName})
		return err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})
	if code, _ := httpGet(t, metricsC, "/readyz"); code != 200 {
		t.Errorf("/readyz after sync = %d, want 200", code)
	}
	resp, err := authv3.NewAuthorizationClient(conn).Check(ctx, relayCheck(tok, nil))
	must(t, err)
	assertAllowed(t, resp, "node-a", "")
	resp, err = authv3.NewAuthorizationClient(conn).Check(ctx, relayCheck("", nil))
	must(t, err)
	if codes.Code(resp.GetStatus().GetCode()) != codes.Unauthenticated {
		t.Errorf("missing token: grpc code %v", codes.Code(resp.GetStatus().GetCode()))
	}
	httpC := unixHTTPClient(filepath.Join(dir, "http.sock"))
	req, _ := http.NewRequest("GET", "http://x/", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Original-Uri", "/relay")
	req.Header.Set("Upgrade", "websocket")
	hresp, err := httpC.Do(req)
	must(t, err)
	hresp.Body.Close()
	if hresp.StatusCode != 200 || hresp.Header.Get(contract.HeaderPeer) != "node-a" {
		t.Errorf("http mode: %d %v", hresp.StatusCode, hresp.Header)
	}
	_, metrics := httpGet(t, metricsC, "/metrics")
	for _, want := range []string{
		`wirekube_extauthz_checks_total{frontend="grpc",reason="allowed",result="allow"} 1`,
		`wirekube_extauthz_checks_total{frontend="grpc",reason="token_missing",result="deny"} 1`,
		`wirekube_extauthz_checks_total{frontend="http",reason="allowed",result="allow"} 1`,
		`wirekube_extauthz_token_reviews_total{result="authenticated"} 1`,
		`wirekube_extauthz_cache_hits_total 1`,
		`wirekube_extauthz_cache_entries 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	checkRevocationListeners(t, conn, dir)
	assertNoToken(t, logBuf.String(), tok)
}

// checkRevocationListeners: the ext_authz listener (conn) does not serve the
// revocation stream; the revocation socket does, with the secret Run wrote.
func checkRevocationListeners(t *testing.T, conn *grpc.ClientConn, dir string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := conn.NewStream(ctx, &revocation.StreamDesc, revocation.WatchMethod)
	must(t, err)
	_ = revocation.Send(cs, []revocation.Op{{Kind: revocation.KindSynced, ID: 1}}) // io.EOF once refused: Recv has the status
	if _, err := revocation.RecvFromExtauthz(cs); status.Code(err) != codes.Unimplemented {
		t.Errorf("Watch on the ext_authz listener: %v, want Unimplemented", err)
	}
	rc, err := grpc.NewClient("unix:"+filepath.Join(dir, "revocation.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(revocation.SecretCredentials{Path: filepath.Join(dir, "secret")}))
	must(t, err)
	defer rc.Close()
	ws, err := rc.NewStream(ctx, &revocation.StreamDesc, revocation.WatchMethod)
	must(t, err)
	must(t, revocation.Send(ws, []revocation.Op{{Kind: revocation.KindSynced, ID: 1}}))
	ops, err := revocation.RecvFromExtauthz(ws)
	if err != nil || len(ops) != 1 || ops[0].Kind != revocation.KindSyncedAck {
		t.Errorf("Watch on the revocation socket: %+v, %v; want the SyncedAck", ops, err)
	}
}

func assertHealth(t *testing.T, hc healthpb.HealthClient, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	for _, svc := range []string{"", authServiceName} {
		r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		must(t, err)
		if r.GetStatus() != want {
			t.Errorf("health(%q) = %v, want %v", svc, r.GetStatus(), want)
		}
	}
}

func assertNoToken(t *testing.T, logText, tok string) {
	t.Helper()
	if holdsToken(logText, tok) {
		t.Error("a token appears in the log output")
	}
}

// TestLogsNeverHoldTokens runs the Check table with a logger of its own and
// greps every line for every token used, also base64-decoded signatures.
func TestLogsNeverHoldTokens(t *testing.T) {
	e := newEnv(t, nil)
	var buf testutil.SyncBuffer
	e.authz.log = slog.New(slog.NewTextHandler(io.MultiWriter(&buf, suiteLog), nil))
	tok := e.tokens()
	for _, tc := range checkCases() {
		_, err := e.srv.Check(context.Background(), tc.req(tok))
		must(t, err)
	}
	out := buf.String()
	if lines := strings.Count(out, "\n"); lines != len(checkCases()) {
		t.Errorf("%d log lines for %d checks, want one per decision", lines, len(checkCases()))
	}
	for _, field := range []string{"identity=", "peer=", "reason=", "latency=", "cache_hit="} {
		if !strings.Contains(out, field) {
			t.Errorf("log lacks field %s", field)
		}
	}
	for name, v := range tok {
		assertNoToken(t, out, v)
		sig, _ := base64.RawURLEncoding.DecodeString(v[strings.LastIndexByte(v, '.')+1:])
		if len(sig) > 8 && bytes.Contains([]byte(out), sig) {
			t.Errorf("token %s signature bytes in log", name)
		}
	}
}

// TestTokenGrepCanFail proves the suite-wide log grep detects a token.
func TestTokenGrepCanFail(t *testing.T) {
	tok := newToken(time.Now())
	if tokensInLog(`{"msg":"x","t":"`+tok+`"}`) == 0 {
		t.Fatal("tokensInLog missed a token")
	}
}
