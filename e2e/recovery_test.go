//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testagent"
)

// The recovery suite: two agents that follow the real agent's
// reconnect policy (testagent.Reconnector) exchange Data frames every
// frameInterval, one through nginx and one through the gRPC front, while a
// component fails. Each case logs the data-path downtime (the longest
// stretch without a frame from the peer, either way) and asserts its goal
// by the order of events (which dials were refused, held or upgraded, and
// when against the fault), never by a duration: downtimes are measured by
// bench/recovery. It also checks that no upgrade was a false "connected"
// (a 101 the server closed before anything flowed).
const (
	frameInterval = 100 * time.Millisecond
	// relayWait is the bridge's --relay-wait (its default).
	relayWait = 7500 * time.Millisecond
)

func (e *env) testRecovery(t *testing.T) {
	t.Run("relay_down_3s", func(t *testing.T) { e.recoverRelay(t, 3*time.Second) })
	t.Run("relay_down_15s", func(t *testing.T) { e.recoverRelay(t, 15*time.Second) })
	t.Run("relay_down_40s", func(t *testing.T) { e.recoverRelay(t, 40*time.Second) })
	t.Run("bridge_sigterm_one_replica", e.recoverDrainOne)
	t.Run("bridge_sigterm_two_replicas", e.recoverDrainTwo)
	t.Run("replica_without_extauthz", e.recoverReplicaWithoutExtauthz)
	// extauthz first: after a kube-apiserver restart its informers take a
	// while to see new Pods and peers (new agents get 403 pod_not_found).
	t.Run("extauthz_killed", e.recoverExtauthz)
	t.Run("kube_apiserver_down_20s", e.recoverAPIServer)
}

// agentPair is two Reconnectors sending each other frames.
type agentPair struct {
	a, b   *testagent.Reconnector
	cancel context.CancelFunc
	done   chan struct{}
}

// startPair connects agent a through fa and b through fb and waits until
// frames flow both ways.
func (e *env) startPair(t *testing.T, name string, fa, fb front) *agentPair {
	t.Helper()
	ida, idb := e.podAgent(t, peerName(fa, name+"-a")), e.podAgent(t, peerName(fb, name+"-b"))
	p := &agentPair{
		a:    &testagent.Reconnector{Options: fa.opts(ida), Key: ida.key, Peer: idb.key, Interval: frameInterval},
		b:    &testagent.Reconnector{Options: fb.opts(idb), Key: idb.key, Peer: ida.key, Interval: frameInterval},
		done: make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() { // owned: stop waits for both agents
		defer close(p.done)
		finished := make(chan struct{}, 2)
		for _, r := range []*testagent.Reconnector{p.a, p.b} {
			go func() { r.Run(ctx); finished <- struct{}{} }()
		}
		<-finished
		<-finished
	}()
	t.Cleanup(p.stop)
	p.waitFlowing(t, time.Now(), 60*time.Second)
	return p
}

// waitFlowing waits until both agents got a peer frame after since.
func (p *agentPair) waitFlowing(t *testing.T, since time.Time, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ra, rb := p.a.Report(), p.b.Report()
		if ra.LastPeer.After(since) && rb.LastPeer.After(since) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no data path within %s: agent a %s, agent b %s", within, describe(ra), describe(rb))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *agentPair) stop() {
	p.cancel()
	<-p.done
}

// downtime is the longest gap either agent saw that ended after since.
func (p *agentPair) downtime(since time.Time) time.Duration {
	return max(p.a.Report().LongestGapSince(since), p.b.Report().LongestGapSince(since))
}

// finish stops the agents and checks that no upgrade was a false
// "connected"; it returns both reports.
func (p *agentPair) finish(t *testing.T) (testagent.Report, testagent.Report) {
	t.Helper()
	p.stop()
	ra, rb := p.a.Report(), p.b.Report()
	for name, r := range map[string]testagent.Report{"a": ra, "b": rb} {
		if n := r.FalseConnected(); n > 0 {
			t.Errorf("agent %s: %d false connected (101 then a server close before anything flowed): %s", name, n, describe(r))
		}
	}
	return ra, rb
}

// describe summarises a report for a failure message or the log.
func describe(r testagent.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d sessions, %d refused dials", len(r.Sessions), len(r.Dials))
	for _, d := range r.Dials {
		fmt.Fprintf(&b, "; %s %d %s", d.At.Format("15:04:05.000"), d.Status, d.Reason)
	}
	return b.String()
}

// agentRecovery is when the agent's data path is back, after a relay
// outage of down that began at its disconnect, given the bridge's hold of
// hold: the agent dials 1 s after the disconnect; a held dial is upgraded
// the moment the relay is back, or refused when the hold ends, and the
// agent then waits twice as long.
func agentRecovery(down, hold time.Duration) time.Duration {
	at, wait := time.Duration(0), testagent.AgentPolicy.First
	for {
		at += wait
		switch {
		case at >= down:
			return at
		case down <= at+hold:
			return down
		}
		at += hold
		wait = min(2*wait, testagent.AgentPolicy.Max)
	}
}

// recoverRelay: the relay is stopped for down and started again.
func (e *env) recoverRelay(t *testing.T, down time.Duration) {
	p := e.startPair(t, fmt.Sprintf("rec-relay%d", down/time.Second), e.fronts[0], e.fronts[1])
	stopped := time.Now()
	fatalIf(t, e.stack.Relay.Stop(10*time.Second))
	time.Sleep(time.Until(stopped.Add(down)))
	// restart is before the relay listens again, back after StartRelay saw
	// it ready: the bridge may redial and upgrade a held request in between,
	// so the order check below uses restart.
	restart := time.Now()
	fatalIf(t, e.stack.StartRelay(context.Background()))
	back := time.Now()
	outage := back.Sub(stopped)
	p.waitFlowing(t, back, 60*time.Second)
	got := p.downtime(stopped)
	ra, rb := p.finish(t)
	t.Logf("RECOVERY relay down %s (measured %s): data path down %s; the agent's schedule gives %s with the hold, %s without; a: %s; b: %s",
		down, outage.Round(time.Millisecond), got.Round(time.Millisecond), agentRecovery(outage, relayWait).Round(time.Millisecond),
		agentRecovery(outage, 0).Round(time.Millisecond), describe(ra), describe(rb))
	// Each outage costs at most itself + 1 s, by the order of events (durations: bench/recovery):
	// each agent's data path came back through a dial that was already held
	// when the relay returned, so the outage cost no backoff step.
	for name, r := range map[string]testagent.Report{"a": ra, "b": rb} {
		heldAcrossReturn(t, name, r, stopped, restart)
	}
}

// heldAcrossReturn: the agent's first session after stopped was dialed
// before back (held by the bridge) and upgraded after it, and every dial
// refused in between was 503 relay_unavailable.
func heldAcrossReturn(t *testing.T, name string, r testagent.Report, stopped, back time.Time) {
	t.Helper()
	for _, d := range r.Dials {
		if d.Dialed.After(stopped) && (d.Status != http.StatusServiceUnavailable || d.Reason != string(contract.ReasonRelayUnavailable)) {
			t.Errorf("agent %s: a dial during the outage got %d %q (%s), want 503 relay_unavailable", name, d.Status, d.Reason, d.Err)
		}
	}
	for _, s := range r.Sessions {
		if s.Dialed.Before(stopped) {
			continue
		}
		if !s.Dialed.Before(back) || s.Upgraded.Before(back) {
			t.Errorf("agent %s: the session after the outage was dialed %s and upgraded %s after the relay stopped (back after %s): want a dial held across the relay's return; %s",
				name, s.Dialed.Sub(stopped).Round(time.Millisecond), s.Upgraded.Sub(stopped).Round(time.Millisecond),
				back.Sub(stopped).Round(time.Millisecond), describe(r))
		}
		return
	}
	t.Errorf("agent %s: no session after the outage: %s", name, describe(r))
}

// recoverDrainOne: SIGTERM on the only bridge; the fronts answer 503
// bridge_unavailable (never a bare 502) until it is back.
func (e *env) recoverDrainOne(t *testing.T) {
	p := e.startPair(t, "rec-drain1", e.fronts[0], e.fronts[1])
	sigterm := time.Now()
	fatalIf(t, e.stack.Bridge.Signal(syscall.SIGTERM))
	select {
	case <-e.stack.Bridge.Done():
	case <-time.After(drainTimeout + 10*time.Second):
		t.Fatal("bridge still running after its drain")
	}
	fatalIf(t, e.stack.StartBridge(context.Background()))
	back := time.Now()
	p.waitFlowing(t, back, 60*time.Second)
	got := p.downtime(sigterm)
	ra, rb := p.finish(t)
	t.Logf("RECOVERY bridge SIGTERM, one replica (restarted %s after SIGTERM): data path down %s; a: %s; b: %s",
		back.Sub(sigterm).Round(time.Millisecond), got.Round(time.Millisecond), describe(ra), describe(rb))
	for _, r := range []testagent.Report{ra, rb} {
		for _, d := range r.Dials {
			if d.Status != http.StatusServiceUnavailable ||
				(d.Reason != string(contract.ReasonBridgeUnavailable) && d.Reason != string(contract.ReasonDraining)) {
				t.Errorf("a dial during the drain got %d %q (%s), want 503 bridge_unavailable or draining", d.Status, d.Reason, d.Err)
			}
		}
	}
}

// recoverDrainTwo: two bridges behind one nginx and one stand-in; SIGTERM on
// the one carrying sessions moves every agent to the other on its first
// retry.
func (e *env) recoverDrainTwo(t *testing.T) {
	rep, err := e.stack.StartReplicas(context.Background())
	fatalIf(t, err)
	defer func() { fatalIf(t, rep.Close()) }()
	tlsConf := e.fronts[0].tls
	fa := front{name: "nginx", url: "wss://" + rep.NginxAddr + "/relay", tls: tlsConf}
	fb := front{name: e.stack.GRPCFront, url: "wss://" + rep.StandinAddr + "/relay", tls: tlsConf}
	p := e.startPair(t, "rec-drain2", fa, fb)
	onStack, onSecond := sessionsActive(e.stack.BridgeMetrics), sessionsActive(rep.Bridge2Metrics)
	victim, restart := rep.Bridge2, false
	if onStack >= onSecond {
		victim, restart = e.stack.Bridge, true
	}
	sigterm := time.Now()
	fatalIf(t, victim.Signal(syscall.SIGTERM))
	select {
	case <-victim.Done():
	case <-time.After(drainTimeout + 10*time.Second):
		t.Fatal("bridge still running after its drain")
	}
	p.waitFlowing(t, time.Now(), 30*time.Second)
	got := p.downtime(sigterm)
	ra, rb := p.finish(t)
	if restart {
		fatalIf(t, e.stack.StartBridge(context.Background()))
	}
	t.Logf("RECOVERY bridge SIGTERM, two replicas (sessions before: %d on the drained one, %d on the other): data path down %s; a: %s; b: %s",
		max(onStack, onSecond), min(onStack, onSecond), got.Round(time.Millisecond), describe(ra), describe(rb))
	// By the order of events (the downtime is bench/recovery's): the drain
	// closed each session on the drained bridge with 1001 draining, and
	// every agent's first dial after the SIGTERM landed on the other bridge,
	// whose session outlived the drain.
	for name, r := range map[string]testagent.Report{"a": ra, "b": rb} {
		movedOnFirstRetry(t, name, r, sigterm)
	}
}

// movedOnFirstRetry: a session of r open at sigterm that a server ended was
// closed 1001 draining; no dial after sigterm was refused, at most one
// session was opened after it, and that one was not closed by a server.
func movedOnFirstRetry(t *testing.T, name string, r testagent.Report, sigterm time.Time) {
	t.Helper()
	for _, s := range r.Sessions {
		if s.Dialed.Before(sigterm) && s.ClosedByServer &&
			(s.CloseCode != websocket.CloseGoingAway || s.CloseText != string(contract.CloseDraining)) {
			t.Errorf("agent %s: its session on the drained bridge ended with %d %q, want the drain's 1001 %s: %s",
				name, s.CloseCode, s.CloseText, contract.CloseDraining, describe(r))
		}
	}
	for _, d := range r.Dials {
		if d.At.After(sigterm) {
			t.Errorf("agent %s: a dial after the SIGTERM was refused (%d %s): it should have landed on the other bridge", name, d.Status, d.Reason)
		}
	}
	var after []testagent.SessionRecord
	for _, s := range r.Sessions {
		if s.Dialed.After(sigterm) {
			after = append(after, s)
		}
	}
	if len(after) > 1 {
		t.Errorf("agent %s: %d sessions opened after the SIGTERM, want at most one (the first retry): %s", name, len(after), describe(r))
	}
	for _, s := range after {
		if s.ClosedByServer {
			t.Errorf("agent %s: the session opened after the SIGTERM was closed by the server (%d %q): %s", name, s.CloseCode, s.CloseText, describe(r))
		}
	}
}

// sessionsActive reads wirekube_bridge_sessions_active from a bridge.
func sessionsActive(metricsAddr string) int {
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(b)) {
		var n int
		if _, err := fmt.Sscanf(line, "wirekube_bridge_sessions_active %d", &n); err == nil {
			return n
		}
	}
	return 0
}

// recoverAPIServer: kube-apiserver down 20 s. Live sessions do not depend
// on it: the data path must not stop.
func (e *env) recoverAPIServer(t *testing.T) {
	p := e.startPair(t, "rec-api", e.fronts[0], e.fronts[1])
	stopped := time.Now()
	fatalIf(t, e.cluster.StopAPIServer())
	time.Sleep(20 * time.Second)
	fatalIf(t, e.cluster.StartAPIServer(context.Background()))
	p.waitFlowing(t, time.Now(), 30*time.Second)
	got := p.downtime(stopped)
	ra, rb := p.finish(t)
	t.Logf("RECOVERY kube-apiserver down 20s: data path down %s (no session lost: a gap is CPU starvation by the restart); a: %s; b: %s",
		got.Round(time.Millisecond), describe(ra), describe(rb))
	keptSessions(t, stopped, ra, rb)
}

// keptSessions: no session ended and no dial happened after since: the
// fault did not touch the data path (live sessions need neither the API
// server nor extauthz).
func keptSessions(t *testing.T, since time.Time, reports ...testagent.Report) {
	t.Helper()
	for i, r := range reports {
		for _, s := range r.Sessions {
			if s.ClosedByServer && s.Ended.After(since) {
				t.Errorf("agent %d: a session ended during the fault (%d %q)", i, s.CloseCode, s.CloseText)
			}
		}
		for _, d := range r.Dials {
			if d.At.After(since) {
				t.Errorf("agent %d: dialed during the fault (%d %s)", i, d.Status, d.Reason)
			}
		}
	}
}

// recoverExtauthz: extauthz is killed (SIGKILL) and restarted. Live sessions
// do not depend on it; new upgrades work again after the restart.
func (e *env) recoverExtauthz(t *testing.T) {
	p := e.startPair(t, "rec-authz", e.fronts[0], e.fronts[1])
	killed := time.Now()
	fatalIf(t, e.stack.Extauthz.Signal(syscall.SIGKILL))
	<-e.stack.Extauthz.Done()
	time.Sleep(3 * time.Second)
	fatalIf(t, e.stack.StartExtauthz(context.Background()))
	p.waitFlowing(t, time.Now(), 30*time.Second)
	got := p.downtime(killed)
	ra, rb := p.finish(t)
	t.Logf("RECOVERY extauthz killed, restarted after 3s: data path down %s; a: %s; b: %s", got.Round(time.Millisecond), describe(ra), describe(rb))
	keptSessions(t, killed, ra, rb)
	for _, f := range e.fronts {
		eventuallySession(t, f, e.podAgent(t, peerName(f, "rec-authz-new")), 30*time.Second)
	}
}
