//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testagent"
)

// testFaults: scenario 7. Each fault hits the shared stack, so the checks
// run through every front at once.
func (e *env) testFaults(t *testing.T) {
	t.Run("7_kube_apiserver_stopped", e.faultAPIServer)
	t.Run("7_verify_offline_and_key_rotation", e.faultOfflineAndRotation)
	t.Run("7_relay_stopped", e.faultRelay)
	t.Run("7_bridge_sigterm_drains", e.faultBridgeDrain)
}

// faultAPIServer: with kube-apiserver down a token extauthz has not reviewed
// yet gets 503 review_unavailable (fail closed), a token it has reviewed
// follows the cache policy (allowed within --cache-ttl), and everything
// recovers after the restart.
func (e *env) faultAPIServer(t *testing.T) {
	cached, fresh := map[string]identity{}, map[string]identity{}
	for _, f := range e.fronts {
		cached[f.name] = e.podAgent(t, peerName(f, "s7-cached"))
		fresh[f.name] = e.podAgent(t, peerName(f, "s7-fresh"))
		session(t, f, cached[f.name]).Close()
	}
	fatalIf(t, e.cluster.StopAPIServer())
	restarted := false
	defer func() {
		if !restarted { // later subtests need the API server
			fatalIf(t, e.cluster.StartAPIServer(context.Background()))
		}
	}()
	for _, f := range e.fronts {
		t.Run(f.name+"/new_token_503", func(t *testing.T) {
			wantRefused(t, f.opts(fresh[f.name]), http.StatusServiceUnavailable, contract.ReasonReviewUnavailable)
		})
		t.Run(f.name+"/cached_identity_allowed", func(t *testing.T) {
			session(t, f, cached[f.name])
		})
	}
	fatalIf(t, e.cluster.StartAPIServer(context.Background()))
	restarted = true
	for _, f := range e.fronts {
		t.Run(f.name+"/recovered", func(t *testing.T) {
			eventuallySession(t, f, fresh[f.name], 30*time.Second)
		})
	}
}

// eventuallySession retries a dial until it succeeds (a component is coming
// back) and proves the session is live.
func eventuallySession(t *testing.T, f front, id identity, within time.Duration) *testagent.Conn {
	t.Helper()
	start := time.Now()
	deadline := start.Add(within)
	for {
		c, err := testagent.Dial(context.Background(), f.opts(id), id.key)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			alive(t, c, id.key)
			if d := time.Since(start); d > time.Second {
				t.Logf("%s: session for %s after %s of retries", f.name, id.peer, d.Round(time.Millisecond))
			}
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no session within %s: %v", f.name, within, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// faultRelay: the raw relay stops -> live sessions close 1011, new upgrades
// get 503 relay_unavailable, /readyz is not ready; all recover.
func (e *env) faultRelay(t *testing.T) {
	live := map[string]*testagent.Conn{}
	ids := map[string]identity{}
	for _, f := range e.fronts {
		ids[f.name] = e.podAgent(t, peerName(f, "s7-relay"))
		// extauthz's informers may still be catching up after the API
		// server restart of the previous fault.
		live[f.name] = eventuallySession(t, f, ids[f.name], 30*time.Second)
	}
	fatalIf(t, e.stack.Relay.Stop(10*time.Second))
	for _, f := range e.fronts {
		t.Run(f.name+"/live_session_closed_1011", func(t *testing.T) {
			wantClose(t, live[f.name], websocket.CloseInternalServerErr, contract.CloseRelayLost, ioTimeout)
		})
		t.Run(f.name+"/new_upgrade_503", func(t *testing.T) {
			wantRefused(t, f.opts(ids[f.name]), http.StatusServiceUnavailable, contract.ReasonRelayUnavailable)
			// Both refusals are found by node name and request id.
			e.traced(t, f, "bridge", ids[f.name].peer, string(contract.CloseRelayLost), "")
			e.traced(t, f, "bridge", ids[f.name].peer, string(contract.ReasonRelayUnavailable), string(contract.ReasonRelayUnavailable))
		})
	}
	t.Run("readyz_not_ready", func(t *testing.T) {
		// The bridge counts a relay dial as ready for 5 s, so allow well beyond that.
		waitStatus(t, "http://"+e.stack.BridgeMetrics+"/readyz", http.StatusServiceUnavailable, 20*time.Second)
	})
	fatalIf(t, e.stack.StartRelay(context.Background()))
	t.Run("recovered", func(t *testing.T) {
		waitStatus(t, "http://"+e.stack.BridgeMetrics+"/readyz", http.StatusOK, 30*time.Second)
		for _, f := range e.fronts {
			eventuallySession(t, f, ids[f.name], 30*time.Second)
		}
	})
}

// faultBridgeDrain: SIGTERM -> /readyz fails at once, the listener closes
// (the fronts answer 503 bridge_unavailable), open sessions close with 1001
// spread over the drain window.
func (e *env) faultBridgeDrain(t *testing.T) {
	type closed struct {
		code int
		text string
		at   time.Time
		err  error
	}
	var conns []*testagent.Conn
	for _, f := range e.fronts {
		for _, n := range []string{"a", "b", "c", "d"} {
			conns = append(conns, eventuallySession(t, f, e.podAgent(t, peerName(f, "s7-drain-"+n)), 30*time.Second))
		}
	}
	results := make([]closed, len(conns))
	readyzURL := "http://" + e.stack.BridgeMetrics + "/readyz"
	var firstClose sync.Once
	readyAtFirstClose := 0
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() { // reader, owned by wg.Wait below
			defer wg.Done()
			ce, err := c.WaitClose(drainTimeout + 5*time.Second)
			results[i] = closed{at: time.Now(), err: err}
			if ce != nil {
				results[i].code, results[i].text = ce.Code, ce.Text
			}
			// When the first session closes, /readyz must already fail.
			firstClose.Do(func() { readyAtFirstClose = statusOf(readyzURL) })
		}()
	}
	late := e.podAgent(t, peerName(e.fronts[0], "s7-drain-late"))
	sigterm := time.Now()
	fatalIf(t, e.stack.Bridge.Signal(syscall.SIGTERM))
	// Polled: a loaded machine may take a while to run the SIGTERM handler;
	// that /readyz failed before any session closed is checked below.
	waitStatus(t, readyzURL, http.StatusServiceUnavailable, drainTimeout)
	notReady := time.Now()
	// The draining bridge has closed its listener: with no other bridge,
	// each front answers 503 bridge_unavailable (no bare 502).
	for _, f := range e.fronts {
		wantRefused(t, f.opts(late), http.StatusServiceUnavailable, contract.ReasonBridgeUnavailable)
		// No bridge saw it; extauthz's allow line of the node
		// carries the request id of the front's bridge_unavailable line.
		e.traced(t, f, "extauthz", late.peer, string(contract.ResultAllowed), string(contract.ReasonBridgeUnavailable))
	}
	wg.Wait()
	for _, f := range e.fronts {
		e.traced(t, f, "bridge", peerName(f, "s7-drain-a"), string(contract.CloseDraining), "")
	}
	first, last := time.Time{}, time.Time{}
	for i, r := range results {
		if r.err != nil || r.code != websocket.CloseGoingAway || r.text != string(contract.CloseDraining) {
			t.Errorf("session %d: closed %d %q (err %v), want 1001 %q", i, r.code, r.text, r.err, contract.CloseDraining)
		}
		if first.IsZero() || r.at.Before(first) {
			first = r.at
		}
		if r.at.After(last) {
			last = r.at
		}
	}
	t.Logf("readyz failed %s after SIGTERM; sessions closed from %s to %s after it",
		notReady.Sub(sigterm).Round(time.Millisecond), first.Sub(sigterm).Round(time.Millisecond), last.Sub(sigterm).Round(time.Millisecond))
	if readyAtFirstClose != http.StatusServiceUnavailable {
		t.Errorf("/readyz answered %d when the first session closed, want 503", readyAtFirstClose)
	}
	if spread := last.Sub(first); spread < drainTimeout/4 {
		t.Errorf("sessions closed within %s, want them spread over the %s drain window", spread, drainTimeout)
	}
	select {
	case <-e.stack.Bridge.Done():
	case <-time.After(drainTimeout + 5*time.Second):
		t.Errorf("bridge still running %s after SIGTERM", drainTimeout+5*time.Second)
	}
	fatalIf(t, e.stack.StartBridge(context.Background()))
	eventuallySession(t, e.fronts[0], late, 30*time.Second)
}

// waitStatus polls url until it answers want.
func waitStatus(t *testing.T, url string, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	got := 0
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if got = resp.StatusCode; got == want {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("GET %s: last status %d, want %d within %s", url, got, want, within)
}

// statusOf is the status of GET url, or 0 when it cannot be reached.
func statusOf(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
