package extauthz

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// suiteLog receives the log output of every Authorizer of the test binary;
// TestMain greps it for every token a test minted.
var suiteLog = &testutil.SyncBuffer{}

// suiteTokens records every token minted by newToken.
var suiteTokens sync.Map

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	if code == 0 {
		if n := tokensInLog(suiteLog.String()); n > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: %d tokens (or their parts) found in the suite's log output\n", n)
			code = 1
		}
	}
	os.Exit(code)
}

// tokensInLog counts minted tokens whose full text or signature appears in
// the log text.
func tokensInLog(logText string) int {
	n := 0
	suiteTokens.Range(func(k, _ any) bool {
		if holdsToken(logText, k.(string)) {
			n++
		}
		return true
	})
	return n
}

// holdsToken reports whether text holds tok or its signature part.
func holdsToken(text, tok string) bool {
	sig := tok[strings.LastIndexByte(tok, '.')+1:]
	return strings.Contains(text, tok) || strings.Contains(text, sig)
}

// newToken mints a token signed by the fake cluster's key (the fake API
// decides whether TokenReview accepts it) that expires at exp; the zero exp
// leaves the claim out.
func newToken(exp time.Time) string { return newTokenAud(exp, "") }

// newTokenAud is newToken with aud, a raw JSON value, as the aud claim
// (empty: ["wirekube-relay"]).
func newTokenAud(exp time.Time, aud string) string {
	var a any = []string{contract.DefaultAudience}
	if aud != "" {
		if err := json.Unmarshal([]byte(aud), &a); err != nil {
			panic(err)
		}
	}
	return tokenSpec{aud: a, exp: exp}.sign()
}

// reviewFunc answers a TokenReview in the fake API.
type reviewFunc func(token string) (authnv1.TokenReviewStatus, error)

// env is an Authorizer over fake Kubernetes clients with running informers.
type env struct {
	t       testing.TB
	client  *fake.Clientset
	dyn     *dynamicfake.FakeDynamicClient
	in      *Informers
	authz   *Authorizer
	live    *revocationhub.LiveBindings // the Authorizer's; a test's hub streams into it
	srv     *CheckServer
	clock   *testutil.Clock
	disc    *fakeDiscovery
	reg     *prometheus.Registry
	reviews atomic.Int64
	mu      sync.Mutex
	answers map[string]reviewFunc
}

var errFakeAPI = errors.New("fake api: connection refused")

const (
	agentSAUID = "uid-sa-agent"
	nodeAUID   = "uid-node-a"
	podAUID    = "uid-pod-a"
)

// peerKeyB64 is node-a's WireGuard public key in the fixtures, peerKeyBB64
// node-b's; node-gone and node-m share one (peer_key_duplicate).
var (
	peerKeyB64  = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	peerKeyBB64 = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, 32))
	dupKeyB64   = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
)

// fixtureKeys are the keys of the fixture peers an allow answer names.
var fixtureKeys = map[string]string{"node-a": peerKeyB64, "node-b": peerKeyBB64}

func fixtureObjects() []runtime.Object {
	sa := func(ns, name, uid string) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
	}
	pod := func(name, uid, saName, node string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "wirekube-system", Name: name, UID: types.UID(uid),
				Labels: map[string]string{"big": strings.Repeat("x", 100)}},
			Spec: corev1.PodSpec{ServiceAccountName: saName, NodeName: node,
				Containers: []corev1.Container{{Name: "agent", Image: "wirekube/agent"}}},
		}
	}
	return []runtime.Object{
		sa("wirekube-system", "wirekube-agent", agentSAUID),
		sa("wirekube-system", "wirekube-relay-peer-node-b", "uid-sa-peer-b"),
		sa("wirekube-system", "wirekube-relay-peer-node-c", "uid-sa-peer-c"),
		sa("wirekube-system", "wirekube-relay-peer-node-bad", "uid-sa-peer-bad"),
		sa("wirekube-system", "wirekube-relay-peer-node-m", "uid-sa-peer-m"),
		sa("monitoring", "prometheus", "uid-sa-prom"),
		sa("default", "stranger", "uid-sa-stranger"),
		pod("agent-a", podAUID, "wirekube-agent", "node-a"),
		pod("agent-other-sa", "uid-pod-other", "default", "node-a"),
		pod("agent-pending", "uid-pod-pending", "wirekube-agent", ""),
		pod("peer-b-pod", "uid-pod-peer-b", "wirekube-relay-peer-node-b", "node-a"),
		pod("agent-orphan", "uid-pod-orphan", "wirekube-agent", "node-gone"),
		inPhase(pod("agent-done", "uid-pod-done", "wirekube-agent", "node-a"), corev1.PodSucceeded),
		inPhase(pod("agent-failed", "uid-pod-failed", "wirekube-agent", "node-a"), corev1.PodFailed),
		inPhase(pod("agent-running", "uid-pod-running", "wirekube-agent", "node-a"), corev1.PodRunning),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: nodeAUID}},
	}
}

func inPhase(p *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	p.Status.Phase = phase
	return p
}

func peerObject(name, key string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "wirekube.io/v1alpha1", "kind": "WireKubePeer",
		"metadata": map[string]any{"name": name, "uid": "uid-peer-" + name},
		"spec":     map[string]any{"publicKey": key, "endpoint": "203.0.113.1:51820", "allowedIPs": []any{"10.0.0.1/32"}},
	}}
	return u
}

func testOptions() Options {
	o := DefaultOptions()
	o.AuthnOnlyPaths = []string{"/metrics"}
	o.AllowServiceAccounts = []string{"monitoring/prometheus"}
	o.AllowedOrigins = []string{"https://dash.example.com"}
	return o
}

func newEnv(t testing.TB, mutate func(*Options)) *env {
	t.Helper()
	return newEnvWith(t, mutate, false)
}

// newEnvDirect is newEnv with TokenReviews answered without the fake
// clientset, whose reactor chain runs under one lock and so serializes
// concurrent calls: the in-flight bound tests need real concurrency.
func newEnvDirect(t testing.TB, mutate func(*Options)) *env {
	t.Helper()
	return newEnvWith(t, mutate, true)
}

// directReviews is a TokenReviewsGetter calling the env's answers.
type directReviews struct{ e *env }

func (d directReviews) TokenReviews() authnv1client.TokenReviewInterface { return d }

func (d directReviews) Create(ctx context.Context, tr *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	_, obj, err := d.e.react(k8stesting.NewRootCreateAction(authnv1.SchemeGroupVersion.WithResource("tokenreviews"), tr))
	if err != nil {
		return nil, err
	}
	return obj.(*authnv1.TokenReview), ctx.Err()
}

func newEnvWith(t testing.TB, mutate func(*Options), direct bool) *env {
	t.Helper()
	return newEnvOpts(t, mutate, direct, io.Discard)
}

// newEnvLogging is newEnv whose Authorizer also logs to logs.
func newEnvLogging(t testing.TB, logs io.Writer) *env {
	t.Helper()
	return newEnvOpts(t, nil, false, logs)
}

func newEnvOpts(t testing.TB, mutate func(*Options), direct bool, logs io.Writer) *env {
	t.Helper()
	opts := testOptions()
	if mutate != nil {
		mutate(&opts)
	}
	e := &env{
		t:       t,
		client:  fake.NewSimpleClientset(fixtureObjects()...),
		clock:   testutil.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)),
		disc:    newFakeDiscovery("test"),
		reg:     prometheus.NewRegistry(),
		answers: map[string]reviewFunc{},
	}
	scheme := runtime.NewScheme()
	e.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{PeerGVR: "WireKubePeerList"},
		peerObject("node-a", peerKeyB64), peerObject("node-b", peerKeyBB64), peerObject("node-m", dupKeyB64),
		peerObject("node-bad", base64.StdEncoding.EncodeToString(make([]byte, 31))),
		peerObject("node-gone", dupKeyB64))
	e.client.PrependReactor("create", "tokenreviews", e.react)
	cfg, err := opts.Complete()
	must(t, err)
	clients := NewClients(e.client, e.dyn)
	in, err := NewInformers(cfg, clients.Core, clients.Peers)
	must(t, err)
	e.in = in
	ctx, cancel := context.WithCancel(context.Background())
	in.Start(ctx)
	t.Cleanup(func() { cancel(); in.Shutdown() })
	must(t, in.WaitForSync(ctx))
	logger := slog.New(slog.NewJSONHandler(io.MultiWriter(suiteLog, logs), nil))
	var reviews authnv1client.TokenReviewsGetter = e.client.AuthenticationV1()
	if direct {
		reviews = directReviews{e}
	}
	e.live = revocationhub.NewLiveBindings()
	e.authz, err = NewAuthorizer(cfg, Deps{Reviews: reviews, Objects: in,
		Registry: e.reg, Logger: logger, Now: e.clock.Now, Keys: e.disc.fetch, Live: e.live})
	must(t, err)
	must(t, e.authz.keys.Refresh(ctx, "periodic"))
	e.srv = &CheckServer{Authorizer: e.authz}
	return e
}

func (e *env) react(action k8stesting.Action) (bool, runtime.Object, error) {
	tr := action.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
	e.reviews.Add(1)
	e.mu.Lock()
	f := e.answers[tr.Spec.Token]
	e.mu.Unlock()
	if f == nil {
		return true, &authnv1.TokenReview{Status: authnv1.TokenReviewStatus{Error: "invalid bearer token"}}, nil
	}
	st, err := f(tr.Spec.Token)
	if err != nil {
		return true, nil, err
	}
	return true, &authnv1.TokenReview{Status: st}, nil
}

// answer registers the fake API's answer for a new token and returns it.
func (e *env) answer(f reviewFunc) string {
	return e.answerToken(newToken(e.clock.Now().Add(time.Hour)), f)
}

// answerToken makes the fake API answer tok with f.
func (e *env) answerToken(tok string, f reviewFunc) string {
	e.mu.Lock()
	e.answers[tok] = f
	e.mu.Unlock()
	return tok
}

// saStatus is an authenticated answer for ServiceAccount ns/name with extra.
func saStatus(ns, name, uid string, extra map[string]string) authnv1.TokenReviewStatus {
	st := authnv1.TokenReviewStatus{
		Authenticated: true,
		Audiences:     []string{"wirekube-relay"},
		User:          authnv1.UserInfo{Username: "system:serviceaccount:" + ns + ":" + name, UID: uid},
	}
	if len(extra) > 0 {
		st.User.Extra = map[string]authnv1.ExtraValue{}
		for k, v := range extra {
			st.User.Extra["authentication.kubernetes.io/"+k] = authnv1.ExtraValue{v}
		}
	}
	return st
}

func static(st authnv1.TokenReviewStatus) reviewFunc {
	return func(string) (authnv1.TokenReviewStatus, error) { return st, nil }
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var (
	deleteOpts = metav1.DeleteOptions{}
	updateOpts = metav1.UpdateOptions{}
)
