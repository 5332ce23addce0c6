//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

// testTraceable: scenario 11. Each refusal kind is found
// by node name in our logs (extauthz's check line or the bridge's line), with
// its reason and a request id, and the front's access log holds a line with
// the same request id and the reason the client got. Drain and relay down
// hit the shared stack: faults_test.go traces them.
func (e *env) testTraceable(t *testing.T, f front) {
	t.Run("token", func(t *testing.T) {
		// A token whose signature verifies but TokenReview refuses: it
		// names a ServiceAccount UID that does not exist. The refusal
		// names the node of its claims.
		id := e.podAgent(t, peerName(f, "s10-token"))
		ctx := context.Background()
		sa, err := e.cluster.Client.CoreV1().ServiceAccounts(stack.Namespace).Get(ctx, agentSA, metaGet)
		fatalIf(t, err)
		node, err := e.cluster.Client.CoreV1().Nodes().Get(ctx, id.peer, metaGet)
		fatalIf(t, err)
		sa.UID = "00000000-0000-4000-8000-000000000022"
		tok, err := e.cluster.SignToken(stack.SignedTokenOptions{ServiceAccount: sa, Pod: id.pod, Node: node,
			Audience: contract.DefaultAudience, IssuedAt: time.Now().Add(-time.Minute), Expiry: time.Now().Add(time.Hour)})
		fatalIf(t, err)
		o := f.opts(id)
		o.TokenFile, o.Token = "", e.track(tok)
		wantRefused(t, o, http.StatusUnauthorized, contract.ReasonTokenInvalid)
		e.traced(t, f, "extauthz", id.peer, string(contract.ReasonTokenInvalid), string(contract.ReasonTokenInvalid))
	})
	t.Run("binding", func(t *testing.T) {
		id := e.peerSAIdentity(t, peerName(f, "s10-binding"), false, "")
		wantRefused(t, f.opts(id), http.StatusForbidden, contract.ReasonPeerNotFound)
		e.traced(t, f, "extauthz", id.peer, string(contract.ReasonPeerNotFound), string(contract.ReasonPeerNotFound))
	})
	t.Run("key_mismatch_after_and_before_the_upgrade", func(t *testing.T) {
		id := e.podAgent(t, peerName(f, "s10-key"))
		c, err := dialRawRetry(f.opts(id))
		fatalIf(t, err)
		defer c.Close()
		other := e.newKey(t)
		fatalIf(t, c.WriteFrame(relayproto.TypeRegister, other[:]))
		wantClose(t, c, websocket.ClosePolicyViolation, contract.CloseRegisterKeyMismatch, ioTimeout)
		// The front logged the upgrade (101), with no deny reason.
		e.traced(t, f, "bridge", id.peer, string(contract.CloseRegisterKeyMismatch), "")
		// Within the backoff the next upgrade is refused before it.
		wantRefused(t, f.opts(id), http.StatusForbidden, contract.CloseRegisterKeyMismatch)
		e.tracedDeny(t, f, "bridge", id.peer, string(contract.CloseRegisterKeyMismatch))
	})
	t.Run("limits", func(t *testing.T) {
		id := e.podAgent(t, peerName(f, "s10-limit"))
		c, err := dialRawRetry(f.opts(id)) // holds the one unregistered slot
		fatalIf(t, err)
		defer c.Close()
		wantRefused(t, f.opts(id), http.StatusTooManyRequests, contract.ReasonPeerUnregisteredLimit)
		e.traced(t, f, "bridge", id.peer, string(contract.ReasonPeerUnregisteredLimit), string(contract.ReasonPeerUnregisteredLimit))
	})
}

// traceLine is one JSON log line of ours.
type traceLine map[string]any

func (l traceLine) str(k string) string { s, _ := l[k].(string); return s }

// ourLines are the JSON lines of component's logs ("extauthz", "bridge")
// that name node (peer or claimed_node) and reason (reason or close_reason).
func (e *env) ourLines(t *testing.T, component, node, reason string) []traceLine {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(e.procs.LogDir, component+".*.log"))
	fatalIf(t, err)
	var out []traceLine
	for _, name := range files {
		b, err := os.ReadFile(name)
		fatalIf(t, err)
		for l := range strings.Lines(string(b)) {
			var m traceLine
			if json.Unmarshal([]byte(l), &m) != nil {
				continue
			}
			if (m.str("peer") == node || m.str("claimed_node") == node) &&
				(m.str("reason") == reason || m.str("close_reason") == reason) {
				out = append(out, m)
			}
		}
	}
	return out
}

// traced finds the last line of component naming node and reason, then the
// front's access log line with its request id and frontReason ("" for an
// upgrade the front saw succeed). It returns the request id.
func (e *env) traced(t *testing.T, f front, component, node, reason, frontReason string) string {
	t.Helper()
	var id string
	testutil.EventuallyWithin(t, 10*time.Second, component+" line for "+node+" "+reason, func() bool {
		lines := e.ourLines(t, component, node, reason)
		if len(lines) == 0 {
			return false
		}
		id = lines[len(lines)-1].str("request_id")
		return true
	})
	if id == "" || id == "[invalid]" {
		t.Fatalf("%s logged %s %s with request_id %q, want the front's", component, node, reason, id)
	}
	var front string
	testutil.EventuallyWithin(t, 10*time.Second, f.name+" access log line "+id, func() bool {
		front = e.frontLine(f, id)
		return front != ""
	})
	if want := frontReasonField(f, frontReason); !strings.Contains(front, want) {
		t.Errorf("%s access log line of request %s has no %s:\n%s", f.name, id, want, front)
	}
	return id
}

// tracedDeny is traced for a deny whose reason component decided and the
// front passed on unchanged; it also checks that the deny line is not the
// one of an earlier request (its request id is new).
func (e *env) tracedDeny(t *testing.T, f front, component, node, reason string) {
	t.Helper()
	n := len(e.ourLines(t, component, node, reason))
	if n < 2 {
		// The first line is the session's close; the deny is a second one.
		testutil.EventuallyWithin(t, 10*time.Second, "a second "+reason+" line", func() bool {
			return len(e.ourLines(t, component, node, reason)) >= 2
		})
	}
	lines := e.ourLines(t, component, node, reason)
	if a, b := lines[0].str("request_id"), lines[len(lines)-1].str("request_id"); a == b {
		t.Fatalf("the close and the deny carry one request id %q", a)
	}
	e.traced(t, f, component, node, reason, reason)
}

// frontLine is the front's access log line holding request id id.
func (e *env) frontLine(f front, id string) string {
	file := "nginx-access.log"
	switch f.name {
	case "envoy":
		file = "envoy.*.log"
	case "envoy-standin":
		file = "envoy-standin.log"
	}
	matches, _ := filepath.Glob(filepath.Join(e.procs.LogDir, file))
	for _, m := range matches {
		b, _ := os.ReadFile(m)
		for l := range strings.Lines(string(b)) {
			if f.name == "nginx" && strings.Contains(l, " request_id="+id) {
				return l
			}
			if f.name != "nginx" && strings.Contains(l, `"route":`) && strings.Contains(l, `"request_id":"`+id+`"`) {
				return l
			}
		}
	}
	return ""
}

// frontReasonField is how the front's access log writes the final deny
// reason (nginx writes "-" for an empty variable).
func frontReasonField(f front, reason string) string {
	if f.name == "nginx" {
		if reason == "" {
			return " reason=- "
		}
		return " reason=" + reason + " "
	}
	if reason == "" {
		return `"status":"101"`
	}
	return `"deny_reason":"` + reason + `"`
}
