//go:build e2e

package e2e

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testagent"
)

// unreadyWithin bounds the wait for a bridge to notice its extauthz is gone
// (--revocation-unready-after is 10 s): a hang guard, not the assertion.
const unreadyWithin = 45 * time.Second

// readyzStatus is the status of a bridge's /readyz (0 when unreachable).
func readyzStatus(metricsAddr string) int {
	resp, err := http.Get("http://" + metricsAddr + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// recoverReplicaWithoutExtauthz: two real replicas, each with its own
// extauthz for its revocation stream (as two Pods). In order: both are
// ready; the second one's extauthz stops; the second replica's /readyz
// turns 503 while the first stays 200; through the front in front of both,
// an upgrade the second takes is refused 503 revocation_unavailable and one
// the first takes is admitted and carries data.
func (e *env) recoverReplicaWithoutExtauthz(t *testing.T) {
	rep, err := e.stack.StartReplicasWith(context.Background(), stack.ReplicaOptions{OwnExtauthz: true})
	fatalIf(t, err)
	defer func() { fatalIf(t, rep.Close()) }()
	if a, b := readyzStatus(e.stack.BridgeMetrics), readyzStatus(rep.Bridge2Metrics); a != 200 || b != 200 {
		t.Fatalf("before: /readyz %d and %d, want both 200", a, b)
	}
	fatalIf(t, rep.Extauthz2.Stop(15*time.Second))
	deadline := time.Now().Add(unreadyWithin)
	for readyzStatus(rep.Bridge2Metrics) != http.StatusServiceUnavailable {
		if time.Now().After(deadline) {
			t.Fatalf("the replica without extauthz still answers /readyz %d after %s", readyzStatus(rep.Bridge2Metrics), unreadyWithin)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := readyzStatus(e.stack.BridgeMetrics); got != 200 {
		t.Fatalf("the replica with its extauthz: /readyz %d, want 200", got)
	}
	f := front{name: "nginx", url: "wss://" + rep.NginxAddr + "/relay", tls: e.fronts[0].tls}
	id := e.podAgent(t, peerName(f, "unready"))
	var refused, admitted int
	for try := 0; try < 12 && (refused == 0 || admitted == 0); try++ {
		c, err := testagent.Dial(context.Background(), f.opts(id), id.key)
		var de *testagent.DialError
		switch {
		case err == nil:
			alive(t, c, id.key)
			c.Close()
			admitted++
		case errors.As(err, &de) && de.Status == http.StatusServiceUnavailable && de.Reason == string(contract.ReasonRevocationUnavailable):
			refused++
		case errors.As(err, &de) && de.Status == http.StatusTooManyRequests:
			time.Sleep(time.Second) // the previous session of the peer is still being torn down
		default:
			t.Fatalf("dial through both replicas: %v, want an admission or 503 revocation_unavailable", err)
		}
	}
	if refused == 0 || admitted == 0 {
		t.Fatalf("%d refused (revocation_unavailable), %d admitted: want the unready replica to refuse and the other to admit", refused, admitted)
	}
}
