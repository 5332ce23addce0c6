//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testagent"
)

// The one-address flood: every agent and a stranger without a token behind
// one address, as kube-proxy's SNAT (externalTrafficPolicy: Cluster), an
// ALB or ingress-nginx in front of Envoy, or an NLB without client address
// preservation make them. The stranger floods /relay upgrades; it must be
// limited, and every agent must still be admitted while it is.

const (
	// floodAgents agents connect while the flooder is limited.
	floodAgents = 4
	// floodLimited source_rate_limited answers count as limited (not in a
	// row: extauthz refills 20 failures a second, so a slow flood gets a
	// 401 between them).
	floodLimited = 20
	// floodMax bounds the flood: far above extauthz's failure burst (200)
	// plus what its rate (20 a second) refills while the flood runs.
	floodMax = 6000
)

// testOneAddressFlood runs the flood through nginx and the Envoy stand-in,
// each with its shipped configuration in front of the stack's extauthz and
// bridge.
func (e *env) testOneAddressFlood(t *testing.T) {
	ids := make([]identity, floodAgents)
	for i := range ids {
		ids[i] = e.podAgent(t, fmt.Sprintf("flood-%d", i))
	}
	// Each front's one address is a loopback address of its own, so that
	// neither shares extauthz's bucket with the other or with the rest of
	// the suite (127.0.0.1).
	sources := []string{"127.0.0.9", "127.0.0.10"}
	for i, f := range e.floodFronts(t) {
		t.Run(f.name, func(t *testing.T) { checkOneAddressFlood(t, f, ids, sources[i]) })
	}
}

// floodFronts starts nginx and the Envoy stand-in for the flood. The
// stand-in's per-address bucket, where envoy.yaml turns it on, is shrunk to
// 50 upgrades (none refilled within the test) so that a bounded flood can
// empty it; whether it applies at all is read from envoy.yaml.
func (e *env) floodFronts(t *testing.T) []front {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(e.runDir, "one-address-flood")
	fatalIf(t, os.MkdirAll(filepath.Join(dir, "logs"), 0o755))
	kp, err := e.stack.FrontCA.ServerCert("wirekube-relay-flood", "relay.example.com")
	fatalIf(t, err)
	cert, key, err := kp.WriteFiles(dir, "front")
	fatalIf(t, err)
	tlsConf := &tls.Config{RootCAs: e.stack.FrontCA.Pool(), MinVersion: tls.VersionTLS12}
	nginxAddr, err := stack.FreeAddr()
	fatalIf(t, err)
	p, err := stack.StartNginx(ctx, e.procs, e.repo, dir, stack.NginxOptions{Listen: nginxAddr, CertFile: cert, KeyFile: key,
		ExtauthzHTTP: e.stack.ExtauthzHTTP, Bridge: e.stack.BridgeAddr, LogDir: filepath.Join(dir, "logs")})
	fatalIf(t, err)
	t.Cleanup(func() { _ = p.Stop(5 * time.Second) })
	b, err := envoyconfig.LoadShipped(envoyconfig.TLSConfig)
	fatalIf(t, err)
	lim, err := envoyconfig.RelaySourceLimit(b, "relay_tls")
	fatalIf(t, err)
	lim.Burst, lim.PerFill, lim.FillInterval, lim.Buckets = 50, 1, time.Hour, 100
	s, err := stack.StartStandin(stack.FrontOptions{CertFile: cert, KeyFile: key, Bridge: e.stack.BridgeAddr,
		LogDir: filepath.Join(dir, "logs"), SourceLimit: lim}, e.stack.ExtauthzGRPC, "envoy-standin-flood.log")
	fatalIf(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return []front{
		{name: "nginx", url: "wss://" + nginxAddr + "/relay", base: "https://" + nginxAddr, tls: tlsConf},
		{name: "envoy-standin", url: "wss://" + s.Addr + "/relay", base: "https://" + s.Addr, tls: tlsConf},
	}
}

// checkOneAddressFlood: the flooder floods until it has been refused
// floodLimited times with source_rate_limited; then every agent, from the
// same address, is admitted on its first dial and its session echoes; then
// the flooder floods again until it is refused floodLimited times more: it
// was limited before and after the agents got in. Every answer the flooder
// gets is 401 token_missing or 429 source_rate_limited.
func checkOneAddressFlood(t *testing.T, f front, ids []identity, source string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dial := fromSource(source)
	fl := newFlooder(f, dial)
	defer fl.client.CloseIdleConnections()
	n, err := fl.untilLimited(ctx)
	if err != nil {
		t.Fatalf("%s: the flooder is not limited after %d upgrades: %v", f.name, n, err)
	}
	t.Logf("%s: the flooder was refused source_rate_limited %d times after %d upgrades", f.name, floodLimited, n)
	for _, id := range ids {
		o := f.opts(id)
		o.NetDialContext = dial
		c, err := testagent.Dial(ctx, o, id.key)
		var de *testagent.DialError
		if errors.As(err, &de) {
			t.Fatalf("%s: agent %s refused while the flooder is limited: HTTP %d %s", f.name, id.peer, de.Status, de.Reason)
		}
		fatalIf(t, err)
		alive(t, c, id.key)
		c.Close()
	}
	if n, err = fl.untilLimited(ctx); err != nil {
		t.Fatalf("%s: the flooder is no longer limited after the agents (%d more upgrades): %v", f.name, n, err)
	}
	t.Logf("%s: %d agents admitted, then %d times more after %d upgrades", f.name, len(ids), floodLimited, n)
}

// flooder sends tokenless /relay upgrades from one address.
type flooder struct {
	f      front
	client *http.Client
	sent   int
}

func newFlooder(f front, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *flooder {
	tr := &http.Transport{TLSClientConfig: f.tls, DialContext: dial, MaxIdleConnsPerHost: 1}
	return &flooder{f: f, client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// untilLimited sends upgrades until floodLimited of them were refused
// source_rate_limited. It returns how many it sent, and an error when an
// answer is neither 401 token_missing nor 429 source_rate_limited, or when
// floodMax upgrades in all were sent first.
func (fl *flooder) untilLimited(ctx context.Context) (int, error) {
	start, limited := fl.sent, 0
	for limited < floodLimited {
		if fl.sent >= floodMax {
			return fl.sent - start, fmt.Errorf("%d upgrades sent in all", fl.sent)
		}
		fl.sent++
		status, reason, err := fl.upgrade(ctx)
		switch {
		case err != nil:
			return fl.sent - start, err
		case status == http.StatusTooManyRequests && reason == string(contract.ReasonSourceRateLimited):
			limited++
		case status == http.StatusUnauthorized && reason == string(contract.ReasonTokenMissing):
		default:
			return fl.sent - start, fmt.Errorf("upgrade %d: HTTP %d %q, want 401 token_missing or 429 source_rate_limited", fl.sent, status, reason)
		}
	}
	return fl.sent - start, nil
}

func (fl *flooder) upgrade(ctx context.Context) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fl.f.base+"/relay", nil)
	if err != nil {
		return 0, "", err
	}
	req.Header = upgradeHeader("")
	resp, err := fl.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, resp.Header.Get(contract.HeaderDenyReason), nil
}

// fromSource dials from the loopback address source.
func fromSource(source string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	return d.DialContext
}
