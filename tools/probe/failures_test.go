package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/contractdoc"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

type reasonConst struct {
	name  string
	value contract.Reason
}

// contractReasons reads every constant of type Reason from the contract
// package's source, so a reason added there is tested here without edits.
func contractReasons(t *testing.T) []reasonConst {
	t.Helper()
	var out []reasonConst
	for _, c := range contractdoc.Constants(t, "Reason") {
		out = append(out, reasonConst{c.Name, contract.Reason(c.Value)})
	}
	if len(out) < 20 {
		t.Fatalf("found only %d reasons in internal/contract: the parser is broken", len(out))
	}
	return out
}

func TestEveryContractReasonHasAFix(t *testing.T) {
	kinds := map[string]int{}
	for _, r := range contractReasons(t) {
		for _, k := range []string{"Reason", "Close", "Result"} {
			if strings.HasPrefix(r.name, k) {
				kinds[k]++
			}
		}
		if f, ok := FixFor(r.value); !ok || len(f) < 20 {
			t.Errorf("%s (%q) has no one-line fix in fixes.go", r.name, r.value)
		}
	}
	// Deny reasons, close reasons and results are all covered: a kind the
	// parser stops finding would silently drop out of this test.
	for _, k := range []string{"Reason", "Close", "Result"} {
		if kinds[k] == 0 {
			t.Errorf("no %s* constant found in internal/contract: the parser or the naming broke", k)
		}
	}
	distinct := map[contract.Reason]bool{}
	for _, r := range contractReasons(t) {
		distinct[r.value] = true
	}
	for r := range fixes {
		if !distinct[r] {
			t.Errorf("fixes.go has a fix for %q, which internal/contract does not declare", r)
		}
	}
}

// specCloses reads docs/spec.md#close-reasons: the close codes the bridge
// sends with each close reason (a "none" cell sends no frame, so a probe
// never reads that reason), whether the reason is sent only to probe
// sessions (its "when" cell names the probe subprotocol), and the deny
// reasons a revoked session closes with (1008, the paragraph below the
// table).
func specCloses(t *testing.T) (codes map[contract.Reason][]int, probeOnly map[contract.Reason]bool) {
	t.Helper()
	spec := contractdoc.Spec(t)
	codes, probeOnly = map[contract.Reason][]int{}, map[contract.Reason]bool{}
	for _, row := range spec.Table(t, "close-reasons").Rows {
		r := contract.Reason(row.Code())
		codes[r] = []int{}
		for _, c := range strings.Split(row.Cell("close"), ",") {
			if c = strings.TrimSpace(c); c == "none" {
				continue
			}
			v, err := strconv.Atoi(c)
			if err != nil {
				t.Fatalf("docs/spec.md:%d: close cell %q of %s", row.Line, row.Cell("close"), r)
			}
			codes[r] = append(codes[r], v)
		}
		probeOnly[r] = strings.Contains(row.Cell("when"), contract.SubprotocolProbe)
	}
	// "A session extauthz revokes ... closes with 1008 and that rule's deny
	// reason: `pod_not_found`, ... ([docs/revocation.md](...))."
	para, _, _ := strings.Cut(spec.ParagraphAfter(t, "close-reasons"), "([docs/revocation.md]")
	if !strings.Contains(para, "closes with 1008") {
		t.Fatalf("docs/spec.md: the paragraph after the close-reasons table no longer says \"closes with 1008\": %q", para)
	}
	revoked := regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(para, -1)
	if len(revoked) == 0 {
		t.Fatal("docs/spec.md: no revocation deny reasons after the close-reasons table")
	}
	for _, m := range revoked {
		codes[contract.Reason(m[1])] = []int{1008}
	}
	return codes, probeOnly
}

// TestProbeCloseReasons: each close the bridge sends to an agent-subprotocol
// session, with the code docs/spec.md gives it, is reported as a close with
// that code and reason and the reason's fix.
func TestProbeCloseReasons(t *testing.T) {
	codes, probeOnly := specCloses(t)
	declared := map[contract.Reason]bool{}
	for _, r := range contractReasons(t) {
		declared[r.value] = true
		if _, ok := codes[r.value]; strings.HasPrefix(r.name, "Close") && !ok {
			t.Errorf("%s (%s) has no row in docs/spec.md#close-reasons", r.name, r.value)
		}
	}
	for r, cs := range codes {
		if !declared[r] {
			t.Errorf("docs/spec.md closes with %s, which internal/contract does not declare", r)
			continue
		}
		if probeOnly[r] {
			continue // sent only to wirekube.relay.probe.v1 sessions: TestProbeRealBridge "check mode" runs a real bridge
		}
		for _, code := range cs {
			t.Run(fmt.Sprintf("%d_%s", code, r), func(t *testing.T) {
				env := newTestEnv(t, false)
				env.bridge.closeCode, env.bridge.closeText = code, string(r)
				exit, out, _ := runProbe(t, env.args()...)
				if exit != ExitClosed {
					t.Errorf("exit %d, want %d", exit, ExitClosed)
				}
				fix, _ := FixFor(r)
				testutil.Contains(t, out, "FAIL register", fmt.Sprintf("closed by the gateway: %d %s", code, r), "fix: "+fix)
			})
		}
	}
}

func TestProbeKeyMismatch(t *testing.T) {
	env := newTestEnv(t, true)
	env.bridge.key[0] ^= 0xff // the peer's key is another one
	code, out, _ := runProbe(t, env.args("--output", "json")...)
	if code != ExitClosed {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	testutil.Contains(t, out, `"close_code": 1008`, `"close_reason": "register_key_mismatch"`, `"reason": "register_key_mismatch"`, `"class": "closed"`)
}

func TestProbeEchoTimeout(t *testing.T) {
	env := newTestEnv(t, false)
	env.bridge.noEcho = true
	code, out, _ := runProbe(t, append(env.args(), "--timeout", "200ms")...)
	if code != ExitEchoTimeout {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	testutil.Contains(t, out, "FAIL echo", "no echo within 200ms", "result: echo_timeout (exit 9)")
}

func TestProbeNetworkFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	_ = ln.Close()
	env := newTestEnv(t, false)
	opts := func(url string) Options {
		return Options{URL: url, TokenFile: env.tokenFile, PublicKey: env.keyB64, Timeout: 2e9,
			lookupHost: func(context.Context, string) ([]string, error) {
				return nil, &net.DNSError{Err: "no such host", Name: "relay.invalid", IsNotFound: true}
			}}
	}
	for _, tc := range []struct {
		name, url, want string
	}{
		{"dns", "wss://relay.invalid/relay", "FAIL dns"},
		{"tcp refused", "ws://" + closedAddr + "/relay", "FAIL tcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			err := runOptions(context.Background(), opts(tc.url), &out)
			if ExitCode(err) != ExitNetwork {
				t.Fatalf("exit %d (%v):\n%s", ExitCode(err), err, out.String())
			}
			testutil.Contains(t, out.String(), tc.want, "result: network (exit 3)", "fix: ")
		})
	}
}

func TestProbeTLSFailures(t *testing.T) {
	tlsEnv := newTestEnv(t, true)
	plainEnv := newTestEnv(t, false)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown authority", []string{"--url", tlsEnv.url()}, `certificate subject "O=Acme Co", issuer "O=Acme Co"`},
		{"plain http endpoint", []string{"--url", "wss" + strings.TrimPrefix(plainEnv.url(), "ws")}, "does not speak TLS"},
		{"wrong host name", []string{"--url", strings.Replace(tlsEnv.url(), "127.0.0.1", "localhost", 1), "--ca-file", tlsEnv.caFile}, "not valid for \"localhost\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--token-file", tlsEnv.tokenFile, "--public-key", tlsEnv.keyB64}, tc.args...)
			code, out, _ := runProbe(t, args...)
			if code != ExitTLS {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			testutil.Contains(t, out, "FAIL tls", tc.want, "result: tls (exit 4)")
		})
	}
}

func TestProbeInsecureSkipVerifyWarns(t *testing.T) {
	env := newTestEnv(t, true)
	code, out, _ := runProbe(t, "--url", env.url(), "--token-file", env.tokenFile, "--public-key", env.keyB64, "--insecure-skip-verify", "--register")
	if code != ExitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	testutil.Contains(t, out, "warning: the certificate was not verified")
}

func TestProbeOtherHTTPAnswers(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	env := newTestEnv(t, false)
	code, out, _ := runProbe(t, "--url", "ws"+strings.TrimPrefix(srv.URL, "http")+"/wrong", "--token-file", env.tokenFile, "--public-key", env.keyB64)
	if code != ExitRejected {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	testutil.Contains(t, out, "404 Not Found", "fix: no relay endpoint at this path")
}

func TestProbeUsage(t *testing.T) {
	env := newTestEnv(t, false)
	empty := writeFile(t, "empty", " \n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no url", []string{"--public-key", env.keyB64}, "--url is required"},
		{"bad scheme", []string{"--url", "https://x/relay", "--public-key", env.keyB64}, "--url: scheme"},
		{"credentials in url", []string{"--url", "wss://u:" + testToken + "@x/relay", "--public-key", env.keyB64}, "--url: credentials"},
		{"no key", []string{"--url", env.url()}, "exactly one of --public-key and --private-key-file"},
		{"both keys", []string{"--url", env.url(), "--public-key", env.keyB64, "--private-key-file", "k"}, "exactly one of"},
		{"bad key", []string{"--url", env.url(), "--public-key", "AAAA"}, "--public-key"},
		{"missing key file", []string{"--url", env.url(), "--private-key-file", "/nonexistent/key", "--token-file", env.tokenFile}, "--private-key-file"},
		{"bad output", []string{"--url", env.url(), "--public-key", env.keyB64, "--output", "xml"}, "--output"},
		{"bad count", []string{"--url", env.url(), "--public-key", env.keyB64, "--register", "--count", "-1"}, "--count: want 1..10000"},
		{"count in check mode", []string{"--url", env.url(), "--public-key", env.keyB64, "--count", "5"}, "--count: only with --register"},
		{"missing token file", []string{"--url", env.url(), "--public-key", env.keyB64, "--token-file", "/nonexistent/token"}, "--token-file"},
		{"empty token file", []string{"--url", env.url(), "--public-key", env.keyB64, "--token-file", empty}, "--token-file"},
		{"missing ca file", []string{"--url", env.url(), "--public-key", env.keyB64, "--token-file", env.tokenFile, "--ca-file", "/nonexistent/ca"}, "--ca-file"},
		{"idle in check mode", []string{"--url", env.url(), "--public-key", env.keyB64, "--idle", "30s"}, "--idle: only with --register"},
		{"idle too long", []string{"--url", env.url(), "--public-key", env.keyB64, "--register", "--idle", "16m"}, "--idle: want 0..15m0s"},
		{"unknown proxy word", []string{"--url", env.url(), "--public-key", env.keyB64, "--token-file", env.tokenFile, "--proxy", "maybe"}, `--proxy: unknown value "maybe"`},
		{"https proxy", []string{"--url", env.url(), "--public-key", env.keyB64, "--token-file", env.tokenFile, "--proxy", "https://u:" + testToken + "@p:3129"}, "--proxy: an https:// proxy"},
		{"unknown flag", []string{"--nope"}, "nope"},
		{"stray argument", []string{"--url", env.url(), "--public-key", env.keyB64, "extra"}, "unexpected argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb strings.Builder
			err := Command(context.Background(), tc.args, &out, &errb)
			if ExitCode(err) != ExitUsage {
				t.Fatalf("exit %d (%v), want %d", ExitCode(err), err, ExitUsage)
			}
			if msg := err.Error() + errb.String(); !strings.Contains(msg, tc.want) || strings.Contains(msg, testToken) {
				t.Errorf("error %q lacks %q or holds the token", msg, tc.want)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	if ExitCode(nil) != ExitOK || ExitCode(errors.New("x")) != ExitInternal ||
		ExitCode(fmt.Errorf("w: %w", &ExitError{Code: ExitTLS, Err: errors.New("t")})) != ExitTLS {
		t.Fatal("ExitCode mapping broken")
	}
}

func TestRedactURL(t *testing.T) {
	o := Options{URL: "wss://relay.example.com/relay?token=" + testToken, PublicKey: "AQIDBAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}
	c, err := o.Complete()
	if err != nil {
		t.Fatal(err)
	}
	if got := redactURL(c.url); strings.Contains(got, testToken) || got != "wss://relay.example.com/relay?<redacted>" {
		t.Fatalf("redactURL = %q", got)
	}
}

func FuzzSanitizeReason(f *testing.F) {
	for _, s := range []string{"register_key_mismatch", "draining: bye", "\x00\xff\n", strings.Repeat("a", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s := sanitize(in, 123)
		if len(s) > 123 {
			t.Fatalf("sanitize kept %d bytes", len(s))
		}
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] >= 0x7f {
				t.Fatalf("unprintable byte %#x kept", s[i])
			}
		}
		if p := reasonPrefix(s); !strings.HasPrefix(s, p) {
			t.Fatalf("reasonPrefix(%q) = %q is not a prefix", s, p)
		}
	})
}

func TestProbeAfterRegister(t *testing.T) {
	for _, tc := range []struct {
		name  string
		msg   []byte
		text  bool
		code  int
		wants []string
	}{
		{"relay error frame", relayproto.AppendFrame(nil, relayproto.TypeError, []byte("boom\x00")), false, ExitClosed,
			[]string{"FAIL register", "relay error frame: boom?", "result: closed (exit 8)"}},
		{"text message", []byte("hello"), true, ExitClosed,
			[]string{"FAIL register", "the gateway sent a text message", "result: closed (exit 8)"}},
		{"relay probe is answered", relayproto.AppendFrame(nil, relayproto.TypeRelayProbe, []byte("12345678")), false, ExitOK,
			[]string{"3/3 round trips", "result: ok"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, false)
			env.bridge.afterRegister, env.bridge.textMessage = tc.msg, tc.text
			env.bridge.relayProbeAnswered = make(chan []byte, 1)
			code, out, _ := runProbe(t, env.args()...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			testutil.Contains(t, out, tc.wants...)
			if tc.code == ExitOK {
				select {
				case got := <-env.bridge.relayProbeAnswered:
					if string(got) != "12345678" {
						t.Errorf("RelayProbe answered with %q", got)
					}
				case <-time.After(5 * time.Second):
					t.Error("RelayProbe not answered")
				}
			}
		})
	}
}

// runOptions completes o and runs it, as Command does after parsing.
func runOptions(ctx context.Context, o Options, w io.Writer) error {
	cfg, err := o.Complete()
	if err != nil {
		return err
	}
	return Run(ctx, cfg, w)
}
