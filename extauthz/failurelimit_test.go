package extauthz

import (
	"context"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/codes"

	"github.com/wirekube/relay-ws/internal/contract"
)

// TestSourceFailureLimit: with a bucket of 2 failures refilled at 1 a
// second, an address's third failure gets 429 source_rate_limited with
// Retry-After 1; while its bucket is empty an agent's valid token from the
// same address is still allowed and a valid token refused for its binding
// keeps its 403; another address is not affected; a second later the
// address fails with its own reason again.
func TestSourceFailureLimit(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.SourceFailureBurst, o.SourceFailureRate = 2, 1 })
	toks := e.tokens()
	other := func(h map[string]string) { h["x-forwarded-for"] = "198.51.100.3" }
	steps := []struct {
		name    string
		token   string
		edit    func(map[string]string)
		advance time.Duration
		want    contract.Reason // "" : allowed
	}{
		{"first failure", "", nil, 0, contract.ReasonTokenMissing},
		{"second failure", "", nil, 0, contract.ReasonTokenMissing},
		{"third failure is over the bucket", "", nil, 0, contract.ReasonSourceRateLimited},
		{"an agent from the same address", toks["agent-pod"], nil, 0, ""},
		{"a valid token refused for its binding", toks["pod-missing"], nil, 0, contract.ReasonPodNotFound},
		{"a malformed token", "not-a-token", nil, 0, contract.ReasonSourceRateLimited},
		{"another address", "", other, 0, contract.ReasonTokenMissing},
		{"a second later", "", nil, time.Second, contract.ReasonTokenMissing},
		{"and empty again", "", nil, 0, contract.ReasonSourceRateLimited},
		{"the agent again", toks["agent-pod"], nil, 0, ""},
	}
	for _, st := range steps {
		e.clock.Advance(st.advance)
		resp, err := e.srv.Check(fromLoopback(), relayCheck(st.token, st.edit)) // Envoy in the Pod: its X-Forwarded-For is believed
		must(t, err)
		if st.want == "" {
			if code := codes.Code(resp.GetStatus().GetCode()); code != codes.OK {
				t.Fatalf("%s: %v %s, want allowed", st.name, code, resp.GetStatus().GetMessage())
			}
			continue
		}
		assertDenied(t, resp, st.want)
		if st.want == contract.ReasonSourceRateLimited && deniedHeader(resp, "Retry-After") != "1" {
			t.Errorf("%s: Retry-After %q, want 1", st.name, deniedHeader(resp, "Retry-After"))
		}
	}
}

// TestSourceFailureLimitOff: --source-failure-burst=0 counts nothing.
func TestSourceFailureLimitOff(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.SourceFailureBurst = 0 })
	for i := range 300 {
		resp, err := e.srv.Check(context.Background(), relayCheck("", nil))
		must(t, err)
		if got := resp.GetStatus().GetMessage(); got != string(contract.ReasonTokenMissing) {
			t.Fatalf("failure %d: %s, want token_missing", i, got)
		}
	}
}

// deniedHeader is the value of a denied answer's header k.
func deniedHeader(resp *authv3.CheckResponse, k string) string {
	for _, h := range resp.GetDeniedResponse().GetHeaders() {
		if h.GetHeader().GetKey() == k {
			return h.GetHeader().GetValue()
		}
	}
	return ""
}
