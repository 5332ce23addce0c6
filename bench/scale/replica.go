package scale

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wirekube/relay-ws/internal/room"
	"github.com/wirekube/relay-ws/internal/test/stack"
)

// replica is one gateway Pod as the manifests run it: wirekube-extauthz,
// wirekube-bridge (following that extauthz's revocation stream) and the
// shipped nginx config as its TLS front, each its own process; plus a
// reference relay for its bridge (one relay could not hold every session
// under the 20,000-descriptor limit of one process).
type replica struct {
	i                                int
	relay, extauthz, bridge, nginx   *stack.Proc
	relayAddr, grpc, http, metrics   string
	bridgeAddr, bridgeMetrics, front string
	killed                           bool
}

// procs of the replica that a figure reports, by role.
func (r *replica) procs() []namedProc {
	return []namedProc{{"nginx", r.nginx}, {"extauthz", r.extauthz}, {"bridge", r.bridge}, {"relay", r.relay}}
}

type namedProc struct {
	role string
	p    *stack.Proc
}

// Per-process limits the run needs under the hard descriptor limit of
// 20,000: a bridge and nginx hold two descriptors per session (the agent's
// side and the upstream), so one replica holds at most this many sessions;
// the bridge refuses the next with 503 at_capacity (a visible limit)
// before nginx would run out of connections.
const (
	maxSessionsPerReplica = 9400
	nginxConnections      = 19800
)

func startReplica(ctx context.Context, procs *stack.Procs, bins map[string]string, dir, repo, kubeconfig string,
	i int, front, cert, key string, extauthzArgs, bridgeArgs []string) (*replica, error) {
	r := &replica{i: i, front: front}
	addrs := []*string{&r.relayAddr, &r.grpc, &r.http, &r.metrics, &r.bridgeAddr, &r.bridgeMetrics}
	for _, a := range addrs {
		var err error
		if *a, err = stack.FreeAddr(); err != nil {
			return nil, err
		}
	}
	name := func(role string) string { return fmt.Sprintf("%s-%d", role, i) }
	var err error
	if r.relay, err = procs.Start(name("refrelay"), bins["wirekube-refrelay"], "--listen="+r.relayAddr, "--no-udp"); err != nil {
		return nil, err
	}
	// The revocation stream as in the Pod: a Unix socket and the per-start
	// secret in a directory only this replica's extauthz and bridge share.
	revDir := filepath.Join(dir, name("revocation"))
	if err := os.MkdirAll(revDir, 0o700); err != nil {
		return nil, err
	}
	sock, secret := "unix:"+filepath.Join(revDir, "revocation.sock"), filepath.Join(revDir, "secret")
	if slices.Contains(bridgeArgs, "--full-bounce=authz") { // extauthz draws from its bridge's room
		extauthzArgs = append(slices.Clip(extauthzArgs), "--bridge-room-url=http://"+r.bridgeMetrics+room.Path)
	}
	if r.extauthz, err = procs.Start(name("extauthz"), bins["wirekube-extauthz"], append([]string{
		"--grpc-listen=" + r.grpc, "--http-listen=" + r.http, "--metrics-listen=" + r.metrics,
		"--revocation-listen=" + sock, "--revocation-secret-file=" + secret,
		"--identity-keys-file=" + filepath.Join(revDir, "identity-keys"),
		"--kubeconfig=" + kubeconfig, "--log-format=json", "--log-level=warn"}, extauthzArgs...)...); err != nil {
		return nil, err
	}
	if err := stack.WaitFor(ctx, r.extauthz, 2*time.Minute, stack.HTTPOK("http://"+r.metrics+"/readyz")); err != nil {
		return nil, fmt.Errorf("extauthz %d: %w", i, err)
	}
	if r.bridge, err = procs.Start(name("bridge"), bins["wirekube-bridge"], append([]string{
		"--listen=" + r.bridgeAddr, "--metrics-listen=" + r.bridgeMetrics, "--relay-addr=" + r.relayAddr,
		"--revocation-addr=" + sock, "--revocation-secret-file=" + secret,
		"--identity-keys-file=" + filepath.Join(revDir, "identity-keys"), "--max-sessions=" + strconv.Itoa(maxSessionsPerReplica),
		"--log-format=json", "--log-level=warn"}, bridgeArgs...)...); err != nil {
		return nil, err
	}
	if err := stack.WaitFor(ctx, r.bridge, 2*time.Minute, stack.HTTPOK("http://"+r.bridgeMetrics+"/readyz")); err != nil {
		return nil, fmt.Errorf("bridge %d: %w", i, err)
	}
	if r.nginx, err = startNginx(ctx, procs, repo, filepath.Join(dir, name("nginx")), stack.NginxOptions{
		Listen: r.front, CertFile: cert, KeyFile: key, ExtauthzHTTP: r.http, Bridge: r.bridgeAddr, LogDir: procs.LogDir,
	}, name("nginx")); err != nil {
		return nil, fmt.Errorf("nginx %d: %w", i, err)
	}
	return r, nil
}

// startNginx runs the shipped config (stack.RenderNginxConfig's
// substitutions only) as one process with enough connections for
// maxSessionsPerReplica sessions.
func startNginx(ctx context.Context, procs *stack.Procs, repo, dir string, o stack.NginxOptions, name string) (*stack.Proc, error) {
	shipped, err := os.ReadFile(filepath.Join(repo, stack.NginxConfigPath))
	if err != nil {
		return nil, err
	}
	site, err := stack.RenderNginxConfig(string(shipped), o)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "site.conf"), []byte(site), 0o644); err != nil {
		return nil, err
	}
	main := stack.NginxMain{Dir: dir, Include: "site.conf", ErrorLog: dir + "/error.log error", AccessLog: "off",
		WorkerConnections: nginxConnections, RlimitNofile: 20000}.Render()
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(main), 0o644); err != nil {
		return nil, err
	}
	bin, err := stack.NginxBinary()
	if err != nil {
		return nil, err
	}
	p, err := procs.Start(name, bin, "-p", dir, "-c", conf, "-g", "daemon off;")
	if err != nil {
		return nil, err
	}
	return p, stack.WaitFor(ctx, p, time.Minute, func(ctx context.Context) error { return tcpUp(ctx, o.Listen) })
}

// metric sums every series of a counter or gauge on a /metrics page.
func metric(ctx context.Context, addr, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum, sc.Err()
}
