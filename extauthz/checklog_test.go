package extauthz

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// checkLineFields are the fields docs/extauthz.md#observability lists for
// the check line, beside slog's time, level and msg.
var checkLineFields = []string{"frontend", "result", "reason", "status", "identity", "peer", "key", "request_id",
	"client_address", "claimed_node", "method", "path", "cache_hit", "offline", "review_owed", "detail", "latency",
	"time", "level", "msg"}

// TestCheckLinesCarryEveryField checks that the check line of an allow
// (TokenReview answered, then cached) and of a deny each carry every
// documented field once, with the values of that decision.
func TestCheckLinesCarryEveryField(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	e := newEnvLogging(t, logs)
	tok := e.tokens()["agent-pod"]
	for range 2 {
		if resp, _ := e.srv.Check(fromLoopback(), relayCheck(tok, nil)); resp.GetOkResponse() == nil {
			t.Fatal("agent check denied")
		}
	}
	if resp, _ := e.srv.Check(fromLoopback(), relayCheck("not-a-token", nil)); resp.GetOkResponse() != nil {
		t.Fatal("malformed token allowed")
	}
	var lines []map[string]any
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if !strings.Contains(l, `"msg":"check"`) {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("check line is not JSON: %v\n%s", err, l)
		}
		for _, f := range checkLineFields {
			if n := strings.Count(l, `"`+f+`":`); n > 1 {
				t.Errorf("%s %d times in %s", f, n, l)
			}
		}
		lines = append(lines, m)
	}
	if len(lines) != 3 {
		t.Fatalf("%d check lines, want 3:\n%s", len(lines), logs.String())
	}
	want := slices.Sorted(slices.Values(checkLineFields))
	for i, m := range lines {
		if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
			t.Errorf("line %d fields %v, want %v", i, got, want)
		}
	}
	for i, hit := range []bool{false, true} {
		m := lines[i]
		for k, v := range map[string]any{"frontend": "grpc", "result": "allow", "reason": "allowed",
			"status": 200.0, "peer": "node-a", "claimed_node": "", "method": "GET", "path": "/relay",
			"cache_hit": hit, "offline": false, "review_owed": false, "detail": "", "client_address": fixtureSource} {
			if m[k] != v {
				t.Errorf("allow %d: %s = %v, want %v", i, k, m[k], v)
			}
		}
	}
	if m := lines[2]; m["result"] != "deny" || m["reason"] != "token_malformed" || m["status"] != 401.0 {
		t.Errorf("deny line: result %v reason %v status %v, want deny token_malformed 401 (docs/spec.md)", m["result"], m["reason"], m["status"])
	}
}
