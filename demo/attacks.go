package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testagent"
)

// revocationWindow is how long kube-apiserver itself keeps accepting a token
// whose Pod is gone (about 10 s, docs/spec.md#apiserver-cache). The gateway must deny
// well inside it; the demo gives its informer until a second before.
const revocationWindow = 9 * time.Second

// attackFunc makes one attempt and returns the answer and a detail line.
type attackFunc func(ctx context.Context) (Outcome, string)

// cast names the nodes of the attacks: a and b are the live agents, c the
// attacker's node (its Pod is deleted by the deleted-Pod attack), d a node
// whose Pod is deleted while its session is live.
type cast struct{ a, b, c, d *node }

// runAttacks runs every attack of the table in order.
func (e *env) runAttacks(ctx context.Context, n cast) []AttackResult {
	runs := map[string]attackFunc{
		AttackOtherNodesKey: func(ctx context.Context) (Outcome, string) { return e.otherNodesKey(ctx, n) },
		AttackNoToken: func(ctx context.Context) (Outcome, string) {
			return e.tryUpgrade(ctx, testagent.Options{URL: e.url(), TLS: e.tls}), ""
		},
		AttackWrongAudience: func(ctx context.Context) (Outcome, string) { return e.wrongAudience(ctx, n.a) },
		AttackTokenInURL:    func(ctx context.Context) (Outcome, string) { return e.tokenInURL(ctx, n.a) },
		AttackDeletedPod:    func(ctx context.Context) (Outcome, string) { return e.deletedPod(ctx, n.c) },
		AttackDeletedLive:   func(ctx context.Context) (Outcome, string) { return e.deletedWhileConnected(ctx, n.d) },
	}
	var out []AttackResult
	for _, at := range Attacks() {
		got, detail := runs[at.Name](ctx)
		out = append(out, AttackResult{Attack: at, Got: got, Detail: detail})
	}
	return out
}

// tryUpgrade only upgrades; an accepted upgrade is closed again at once.
func (e *env) tryUpgrade(ctx context.Context, o testagent.Options) Outcome {
	c, err := testagent.DialRaw(ctx, o)
	if err == nil {
		c.Close()
	}
	return outcomeOf(err)
}

// otherNodesKey: node-c's valid token, but it registers node-b's key. The
// identity is fine, so the upgrade succeeds; the bridge must close the
// session instead of forwarding the Register.
func (e *env) otherNodesKey(ctx context.Context, n cast) (Outcome, string) {
	c, err := testagent.Dial(ctx, e.agentOptions(n.c), n.b.key)
	if err != nil {
		return outcomeOf(err), ""
	}
	defer c.Close()
	ce, err := c.WaitClose(ioTimeout)
	if ce != nil {
		return outcomeOf(ce), ""
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return Outcome{Kind: KindOpen}, fmt.Sprintf("not closed within %s", ioTimeout)
	}
	return outcomeOf(err), ""
}

func (e *env) wrongAudience(ctx context.Context, a *node) (Outcome, string) {
	tok, err := e.attackToken(ctx, a, stack.Issuer, "wrong-audience")
	if err != nil {
		return Outcome{Kind: KindError, Reason: err.Error()}, ""
	}
	return e.tryUpgrade(ctx, testagent.Options{URL: e.url(), Token: tok, TLS: e.tls}), "audience " + stack.Issuer
}

// tokenInURL: a valid Authorization header, and a second valid token in the
// query string, where access logs and proxies would keep it.
func (e *env) tokenInURL(ctx context.Context, a *node) (Outcome, string) {
	tok, err := e.attackToken(ctx, a, contract.DefaultAudience, "token-in-url")
	if err != nil {
		return Outcome{Kind: KindError, Reason: err.Error()}, ""
	}
	o := e.agentOptions(a)
	o.URL += "?access_token=" + url.QueryEscape(tok)
	return e.tryUpgrade(ctx, o), ""
}

// deletedPod: node-c connects properly first, so extauthz holds its
// TokenReview in cache; then its Pod is force-deleted. The token must be
// refused well before kube-apiserver's own ~10 s validation cache expires.
func (e *env) deletedPod(ctx context.Context, c *node) (Outcome, string) {
	conn, err := e.connect(ctx, c)
	if err != nil {
		return Outcome{Kind: KindError, Reason: "node-c could not connect before the deletion: " + err.Error()}, ""
	}
	conn.Close()
	deleted := time.Now()
	if err := e.cluster.DeletePodNow(ctx, stack.Namespace, c.pod.Name); err != nil {
		return Outcome{Kind: KindError, Reason: err.Error()}, ""
	}
	want := Refused(contract.ReasonPodNotFound)
	var got Outcome
	for time.Since(deleted) < revocationWindow && ctx.Err() == nil {
		if got = e.tryUpgrade(ctx, e.agentOptions(c)); got == want {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return got, fmt.Sprintf("%s after the deletion", roundDuration(time.Since(deleted)))
}

// deletedWhileConnected: node-d's session is live when its Pod is
// force-deleted. The gateway must close the session itself (1008
// pod_not_found, docs/revocation.md), not wait for the agent to reconnect.
func (e *env) deletedWhileConnected(ctx context.Context, d *node) (Outcome, string) {
	conn, err := e.connect(ctx, d)
	if err != nil {
		return Outcome{Kind: KindError, Reason: "node-d could not connect: " + err.Error()}, ""
	}
	defer conn.Close()
	deleted := time.Now()
	if err := e.cluster.DeletePodNow(ctx, stack.Namespace, d.pod.Name); err != nil {
		return Outcome{Kind: KindError, Reason: err.Error()}, ""
	}
	ce, err := conn.WaitClose(revocationWindow)
	took := roundDuration(time.Since(deleted))
	if ce != nil {
		return outcomeOf(ce), fmt.Sprintf("closed %s after the delete", took)
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return Outcome{Kind: KindOpen}, fmt.Sprintf("still open %s after the delete", took)
	}
	return outcomeOf(err), ""
}

// attackToken issues a token for an attack and keeps it in
// tokens/attacks/<name>, so a user can replay the attack with curl.
func (e *env) attackToken(ctx context.Context, n *node, audience, name string) (string, error) {
	tok, err := e.podToken(ctx, n, audience)
	if err != nil {
		return "", err
	}
	_, err = e.state.writeFile("tokens/attacks/"+name, []byte(tok+"\n"), 0o600)
	return tok, err
}

// connect dials n's agent (Register with its own key) and proves the session
// is live with an echo through the relay.
func (e *env) connect(ctx context.Context, n *node) (*testagent.Conn, error) {
	// node-c connects right after its key-mismatch attack: the bridge's
	// backoff window (403 register_key_mismatch) has to pass first.
	c, err := testagent.RetryBackoff(ctx, 10*time.Second, func() (*testagent.Conn, error) {
		return testagent.Dial(ctx, e.agentOptions(n), n.key)
	})
	if err != nil {
		return nil, err
	}
	if err := echo(c, n.key); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
