//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/tools/probe"
)

// defaultIdleHold is how long idle_through_fronts holds its sessions when
// WIREKUBE_E2E_IDLE is unset. The shortest finite idle timeout the project
// ships on a session's path (docs/timeouts.md) is nginx's proxy_read_timeout
// and proxy_send_timeout, 120 s; the others are 300 s (Envoy, ALB), 3600 s
// (ingress-nginx) or none (Caddy, Traefik). A hold of 120 s + 30 s outlasts
// it with margin, so a front that cut idle sessions at its shipped value
// would fail here, at one CI cost of 150 s. WIREKUBE_E2E_IDLE=10m is the
// run docs/timeouts.md records.
const defaultIdleHold = 150 * time.Second

// idleProxyTimeout is the Timeout of idle_through_fronts' tinyproxy:
// Debian's /etc/tinyproxy/tinyproxy.conf value, as a forward proxy a node
// meets would have it (forward_proxy's 10 s is the short one it names).
const idleProxyTimeout = 600

// idleHold reads WIREKUBE_E2E_IDLE (a Go duration, up to the probe's
// --idle limit).
func idleHold(t *testing.T) time.Duration {
	v, ok := os.LookupEnv("WIREKUBE_E2E_IDLE")
	if !ok || v == "" {
		return defaultIdleHold
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > probe.MaxIdle {
		t.Fatalf("WIREKUBE_E2E_IDLE: want a Go duration above 0s and at most %s (e.g. 10m)", probe.MaxIdle)
	}
	return d
}

// idlePath is one path to the gateway held idle: a front, or tinyproxy
// in front of one.
type idlePath struct {
	name string
	args []string // the probe's arguments, --idle excepted
	want string   // the report's stages, "name:status" in order
	// result, written by the path's goroutine
	code int
	res  probe.Result
	err  error
}

// testIdleThroughFronts: one idle registered session per front of the
// suite at the same time (every row of the matrix, the suite's nginx and
// gRPC front, and the matrix's nginx behind a real tinyproxy), each held by
// wirekube-relay-probe --register --idle as an agent holds it: a Keepalive
// every 25 s, the bridge's pings answered, nothing else. After the hold each
// session must still be the same open session and carry one Data frame to
// the relay and back (stage idle ok after register and echo ok). The hold
// is real time: no front runs on a fake clock.
func (e *env) testIdleThroughFronts(t *testing.T, m *frontMatrix) {
	hold := idleHold(t)
	ca := e.frontCAFile(t)
	direct := "dns:skipped tcp:ok tls:ok upgrade:ok register:ok echo:ok idle:ok"
	var paths []*idlePath
	add := func(name, url string, id identity, want string, extra ...string) {
		args := append([]string{"--url", url, "--token-file", id.tokenFile, "--public-key", id.key.Base64(),
			"--ca-file", ca, "--register", "--count", "1"}, extra...)
		paths = append(paths, &idlePath{name: name, args: args, want: want})
	}
	var nginxRow *frontRow
	for _, r := range m.rows {
		add(r.name, r.url, e.matrixAgent(t, r, "idle"), direct)
		if r.name == "nginx" {
			nginxRow = r
		}
	}
	for _, f := range e.fronts {
		add("suite-"+f.name, f.url, e.podAgent(t, peerName(f, "idle")), direct)
	}
	if nginxRow == nil {
		t.Fatal("the matrix has no nginx row")
	}
	port, err := stack.PortOf(strings.TrimPrefix(nginxRow.base, "https://"))
	fatalIf(t, err)
	o := stack.TinyproxyOptions{ConnectPorts: []int{port}, IdleTimeout: idleProxyTimeout}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tp, err := stack.StartTinyproxy(ctx, e.procs, filepath.Join(e.runDir, "tinyproxy-idle"), "tinyproxy-idle", o)
	fatalIf(t, err)
	t.Cleanup(func() { _ = tp.Proc.Stop(5 * time.Second) })
	add("tinyproxy-"+strconv.Itoa(idleProxyTimeout)+"s-nginx", nginxRow.url, e.matrixAgent(t, nginxRow, "idleproxy"),
		"dns:skipped proxy:ok connect:ok tls:ok upgrade:ok register:ok echo:ok idle:ok", "--proxy", tp.URL(o, false).String())

	t.Logf("holding %d sessions idle for %s at once (WIREKUBE_E2E_IDLE)", len(paths), hold)
	var wg sync.WaitGroup
	for _, p := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.code, p.res, p.err = e.probeReport(append(p.args, "--idle", hold.String())...)
		}()
	}
	wg.Wait()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			if p.err != nil {
				t.Fatal(p.err)
			}
			st := stageOf(p.res, probe.StageIdle)
			if p.code != probe.ExitOK {
				t.Fatalf("exit %d reason %q, idle stage %+v, fix %q; want exit 0: the session open after %s idle and an echo after it",
					p.code, p.res.Reason, st, p.res.Fix, hold)
			}
			wantStages(t, p.res, p.want)
			if st.CloseCode != 0 || st.Error != "" {
				t.Errorf("idle stage %+v: the session was closed", st)
			}
			t.Logf("%s: %s", p.name, st.Detail)
		})
	}
}
