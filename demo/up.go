package demo

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/wirekube/relay-ws/internal/test/stack"
)

// Up brings the same stack up with node-a and node-b, checks that both
// agents connect, calls ready with the report so far, and keeps everything
// running until ctx ends (Ctrl-C); then it stops every process.
func Up(ctx context.Context, cfg *Config, ready func(*Report)) (*Report, error) {
	return session(ctx, cfg, func(ctx context.Context, e *env, rep *Report) error {
		if _, err := e.connectPair(ctx, rep); err != nil {
			return err
		}
		ready(rep)
		return e.watch(ctx)
	})
}

// watch waits until ctx ends, or fails as soon as one of the stack's
// processes exits on its own (the stack is then broken: say which and stop).
func (e *env) watch(ctx context.Context) error {
	procs := []*stack.Proc{e.cluster.Etcd, e.cluster.APIServer}
	for _, p := range []*stack.Proc{e.gw.Relay, e.gw.Extauthz, e.gw.Bridge, e.gw.Nginx, e.gw.Envoy} {
		if p != nil {
			procs = append(procs, p)
		}
	}
	died := make(chan *stack.Proc, len(procs))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() { // owned: ends on stop, waited for below
			defer wg.Done()
			select {
			case <-p.Done():
				died <- p
			case <-stop:
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	select {
	case <-ctx.Done():
		return nil
	case p := <-died:
		return fmt.Errorf("%s (pid %d) exited on its own: %v; see %s", p.Name, p.PID(), p.Err(), p.LogPath)
	}
}

// WriteUpInstructions prints how to use the running stack of `make up`:
// the probe as an agent's operator runs it, kubectl and curl. probe is the
// path of wirekube-relay-probe. No token or key is printed: the commands
// read them from the state dir's files.
func WriteUpInstructions(w io.Writer, rep *Report, probe string) error {
	wh := rep.Where
	tokenA, keyA := firstOr(wh.TokenFiles, "<token file>"), firstOr(wh.KeyFiles, "<key file>")
	pubA := strings.TrimSuffix(keyA, ".key") + ".pub"
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe stack is up: %s in front of wirekube-extauthz and wirekube-bridge. Ctrl-C stops everything.\n\n", wh.Front)
	fmt.Fprintf(&b, "Connect as node-a's agent with the probe:\n  %s --url %s \\\n    --token-file %s --ca-file %s \\\n    --public-key $(cat %s)\n",
		probe, wh.URL, tokenA, wh.CAFile, pubA)
	fmt.Fprintf(&b, "  (or --private-key-file %s; node-b has the same files under its name)\n\n", keyA)
	fmt.Fprintf(&b, "Look at the cluster:\n  KUBECONFIG=%s kubectl get wkpeer\n", wh.Kubeconfig)
	fmt.Fprintf(&b, "  KUBECONFIG=%s kubectl -n wirekube-system create token wirekube-agent \\\n"+
		"    --audience=wirekube-relay --bound-object-kind=Pod --bound-object-name=agent-node-a > %s\n\n", wh.Kubeconfig, tokenA)
	fmt.Fprintf(&b, "Revoke a live session: while a client is connected as node-b (its files are beside node-a's),\n"+
		"  delete its Pod; the gateway closes the session at once with 1008 pod_not_found (docs/revocation.md),\n"+
		"  the bridge log says close_reason pod_not_found and wirekube_bridge_revocation_lag_seconds has the lag:\n"+
		"  KUBECONFIG=%s kubectl -n wirekube-system delete pod agent-node-b --grace-period=0 --force\n\n", wh.Kubeconfig)
	fmt.Fprintf(&b, "Talk to the front with curl:\n  curl --cacert %s %s/healthz\n", wh.CAFile, wh.HTTPSBase)
	fmt.Fprintf(&b, "  curl -i --cacert %s %s/relay    # no token: 401, X-WireKube-Deny-Reason: token_missing\n\n", wh.CAFile, wh.HTTPSBase)
	fmt.Fprintf(&b, "Metrics: %s  %s\nLogs: %s\n", wh.ExtauthzMetrics, wh.BridgeMetrics, wh.LogDir)
	_, err := io.WriteString(w, b.String())
	return err
}

func firstOr(s []string, def string) string {
	if len(s) == 0 {
		return def
	}
	return s[0]
}
