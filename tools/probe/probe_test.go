package probe

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runProbe runs the command in-process and checks the token never appears
// in its output.
func runProbe(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Command(context.Background(), args, &out, &errb)
	all := out.String() + errb.String()
	if err != nil {
		all += err.Error()
	}
	if strings.Contains(all, testToken) || strings.Contains(all, "secret-test-token") {
		t.Fatalf("the token leaked into the output:\n%s", all)
	}
	return ExitCode(err), out.String(), errb.String()
}

func TestProbeSuccess(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tls   bool
		extra []string
		want  []string
	}{
		{"ws text", false, nil, []string{"ok   dns", "ok   tcp", "skip tls", "101 Switching Protocols", `subprotocol "wirekube.relay.v1"`, "3/3 round trips", "result: ok", "warning: ws:// sends the token in clear text"}},
		{"wss text", true, []string{"--count", "5"}, []string{"ok   tls", "TLS 1.3", "expires", "5/5 round trips", "result: ok"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, tc.tls)
			args := env.args(tc.extra...)
			if !tc.tls {
				args[1] = strings.Replace(args[1], "127.0.0.1", "localhost", 1) // exercise DNS
			}
			code, out, _ := runProbe(t, args...)
			if code != ExitOK {
				t.Fatalf("exit %d, want 0:\n%s", code, out)
			}
			testutil.Contains(t, out, tc.want...)
		})
	}
}

func TestProbeJSON(t *testing.T) {
	env := newTestEnv(t, true)
	code, out, _ := runProbe(t, env.args("--output", "json", "--count", "2")...)
	if code != ExitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var res Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	var names []string
	for _, s := range res.Stages {
		names = append(names, s.Name+":"+s.Status)
	}
	want := "dns:skipped tcp:ok tls:ok upgrade:ok register:ok echo:ok"
	if got := strings.Join(names, " "); got != want || !res.OK || res.Class != "ok" {
		t.Fatalf("stages %q ok=%v class=%q, want %q", got, res.OK, res.Class, want)
	}
	tlsInfo := res.Stages[2].TLS
	if tlsInfo == nil || !tlsInfo.Verified || tlsInfo.NotAfter.IsZero() || tlsInfo.Subject == "" {
		t.Errorf("tls info incomplete: %+v", tlsInfo)
	}
	if e := res.Stages[5].Echo; e == nil || e.Received != 2 || e.MinMS > e.MaxMS {
		t.Errorf("echo info: %+v", e)
	}
	if res.Stages[4].Key != env.bridge.key.Fingerprint() || strings.Contains(out, env.keyB64) {
		t.Errorf("register must show the fingerprint only: %+v", res.Stages[4])
	}
}

func TestProbePrivateKeyFile(t *testing.T) {
	env := newTestEnv(t, false)
	// RFC 7748 section 6.1: Alice's private key and public key.
	priv, _ := hex.DecodeString("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
	pub, _ := hex.DecodeString("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
	copy(env.bridge.key[:], pub)
	keyFile := writeFile(t, "private.key", b64(priv)+"\n")
	code, out, _ := runProbe(t, "--url", env.url(), "--token-file", env.tokenFile, "--private-key-file", keyFile, "--register")
	if code != ExitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if strings.Contains(out, b64(priv)) {
		t.Fatal("private key printed")
	}
}

func TestPublicFromPrivate(t *testing.T) {
	// RFC 7748 section 6.1, Bob.
	priv, _ := hex.DecodeString("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
	k, err := PublicFromPrivate(b64(priv))
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(k[:]); got != "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f" {
		t.Fatalf("public key %s", got)
	}
	for _, bad := range []string{"", "not base64!", b64(priv[:31])} {
		if _, err := PublicFromPrivate(bad); err == nil {
			t.Errorf("PublicFromPrivate(%q) accepted", bad)
		}
	}
}

// exitForDenyStatus is docs/tools.md's exit-code table, written down here
// apart from exitForStatus: 401 -> 5, 403 -> 6, 503 and 429 -> 7, any other
// refusal (400, 404, 405, ...) -> 10.
var exitForDenyStatus = map[int]int{400: 10, 401: 5, 403: 6, 404: 10, 405: 10, 429: 7, 503: 7}

func TestProbeHTTPDenies(t *testing.T) {
	for _, r := range contractReasons(t) {
		if !strings.HasPrefix(r.name, "Reason") {
			continue
		}
		t.Run(string(r.value), func(t *testing.T) {
			env := newTestEnv(t, false)
			env.bridge.deny = r.value
			code, out, _ := runProbe(t, env.args()...)
			want, ok := exitForDenyStatus[r.value.HTTPStatus()]
			if !ok {
				t.Fatalf("status %d of %s is not in docs/tools.md's exit-code table", r.value.HTTPStatus(), r.value)
			}
			if code != want {
				t.Errorf("exit %d, want %d", code, want)
			}
			fix, _ := FixFor(r.value)
			testutil.Contains(t, out, "FAIL upgrade", "reason "+string(r.value), "fix: "+fix)
		})
	}
}

func TestProbeDenyExitCodes(t *testing.T) {
	for _, tc := range []struct {
		reason contract.Reason
		code   int
	}{
		{contract.ReasonAudienceMismatch, ExitDenied401},
		{contract.ReasonPeerNotFound, ExitDenied403},
		{contract.ReasonReviewUnavailable, ExitUnavailable},
		{contract.ReasonSubprotocol, ExitRejected},
		{contract.ReasonNotWebSocket, ExitRejected},
		{"some_future_reason", ExitDenied403}, // unknown reasons are 403 and get the status fix
	} {
		t.Run(string(tc.reason), func(t *testing.T) {
			env := newTestEnv(t, false)
			env.bridge.deny = tc.reason
			if code, out, _ := runProbe(t, env.args()...); code != tc.code || !strings.Contains(out, "fix: ") {
				t.Errorf("exit %d, want %d:\n%s", code, tc.code, out)
			}
		})
	}
}

func TestProbeNoToken(t *testing.T) {
	env := newTestEnv(t, false)
	code, out, _ := runProbe(t, "--url", env.url(), "--token-file", "", "--public-key", env.keyB64)
	if code != ExitDenied401 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	testutil.Contains(t, out, "401 Unauthorized, reason token_missing", "result: unauthorized (exit 5)")
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// TestProbeReturnsTheResult: a caller that renders the report itself
// completes the options and calls Probe.
func TestProbeReturnsTheResult(t *testing.T) {
	env := newTestEnv(t, false)
	cfg, err := Options{URL: env.url(), TokenFile: env.tokenFile, PublicKey: env.keyB64, Count: 2, Register: true}.Complete()
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if res := cfg.Probe(context.Background()); !res.OK || res.Stages[len(res.Stages)-1].Echo.Received != 2 {
		t.Fatalf("Probe: %+v", res)
	}
	if _, err := (Options{}).Complete(); ExitCode(err) != ExitUsage {
		t.Fatalf("Complete without options: %v", err)
	}
}
