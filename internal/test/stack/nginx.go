package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// NginxConfigPath is the config users deploy; the suite runs it verbatim
// apart from the substitutions in RenderNginxConfig.
const NginxConfigPath = "nginx/wirekube-relay.conf"

// NginxOptions are the values substituted into the shipped config.
type NginxOptions struct {
	Listen       string // 127.0.0.1:port
	CertFile     string
	KeyFile      string
	ExtauthzHTTP string // wirekube-extauthz --http-listen
	Bridge       string // wirekube-bridge --listen
	// ExtraBridges are more servers of the bridge upstream (the drain
	// hand-over test: two bridges behind one front).
	ExtraBridges []string
	LogDir       string
	// ProxyProtocolFrom, when set (a CIDR), serves the shipped file with
	// its PROXY protocol lines turned on: proxy_protocol on the listen
	// line and the commented set_real_ip_from / real_ip_header
	// proxy_protocol pair uncommented, trusting this range.
	ProxyProtocolFrom string
}

// The shipped PROXY protocol lines, commented out in nginx/wirekube-relay.conf.
const nginxProxyProtocolLines = "    #   set_real_ip_from  10.0.0.0/16;     # the load balancer\n    #   real_ip_header    proxy_protocol;\n"

// RenderNginxConfig substitutes the deployment-specific values of the shipped
// config. Every placeholder must occur exactly once, so a change to the
// shipped file that the suite would silently not test fails here.
func RenderNginxConfig(shipped string, o NginxOptions) (string, error) {
	subs := []struct{ old, new string }{
		{"listen 443 ssl backlog=4096;", "listen " + o.Listen + " ssl backlog=4096" + proxyProtocolParam(o) + ";"},
		{"/etc/nginx/tls/tls.crt", o.CertFile},
		{"/etc/nginx/tls/tls.key", o.KeyFile},
		{"server 127.0.0.1:9002;", "server " + o.ExtauthzHTTP + ";"},
		{bridgeServerLine, bridgeServers(o)},
		{"/var/log/nginx/wirekube-relay.access.log", filepath.Join(o.LogDir, "nginx-access.log")},
		// Only the path: the level stays as shipped, because scenario 8 greps
		// this log for every token (at info nginx logs a duplicate
		// Authorization line, and at error a query string, in full).
		{"/var/log/nginx/wirekube-relay.error.log", filepath.Join(o.LogDir, "nginx-relay-error.log")},
	}
	if o.ProxyProtocolFrom != "" {
		subs = append(subs, struct{ old, new string }{nginxProxyProtocolLines,
			"    set_real_ip_from  " + o.ProxyProtocolFrom + ";\n    real_ip_header    proxy_protocol;\n"})
	}
	for _, s := range subs {
		if n := strings.Count(shipped, s.old); n != 1 {
			return "", fmt.Errorf("nginx config: %q occurs %d times, want 1", s.old, n)
		}
		shipped = strings.Replace(shipped, s.old, s.new, 1)
	}
	return shipped, nil
}

// bridgeServerLine is the shipped bridge upstream's server line.
func proxyProtocolParam(o NginxOptions) string {
	if o.ProxyProtocolFrom == "" {
		return ""
	}
	return " proxy_protocol"
}

const bridgeServerLine = "server 127.0.0.1:8081 max_fails=1 fail_timeout=5s;"

// bridgeServers renders the bridge upstream's server lines.
func bridgeServers(o NginxOptions) string {
	var b strings.Builder
	for i, addr := range append([]string{o.Bridge}, o.ExtraBridges...) {
		if i > 0 {
			b.WriteString("\n    ")
		}
		b.WriteString(strings.Replace(bridgeServerLine, "127.0.0.1:8081", addr, 1))
	}
	return b.String()
}

// NginxBinary is the system nginx: the one on PATH, else Debian's
// /usr/sbin/nginx (off a normal user's PATH). Everything that runs nginx
// looks it up here; .ci/apt-install is its shell twin.
func NginxBinary() (string, error) { return lookBin("nginx", "/usr/sbin/nginx") }

// StartNginx runs the system nginx with its own prefix, config and pid file
// in dir, in the foreground, so it is stopped by PID like the others.
func StartNginx(ctx context.Context, procs *Procs, repoRoot, dir string, o NginxOptions) (*Proc, error) {
	bin, err := NginxBinary()
	if err != nil {
		return nil, fmt.Errorf("%w (make nginx)", err)
	}
	shipped, err := os.ReadFile(filepath.Join(repoRoot, NginxConfigPath))
	if err != nil {
		return nil, fmt.Errorf("nginx config: %w", err)
	}
	site, err := RenderNginxConfig(string(shipped), o)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("nginx dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wirekube-relay.conf"), []byte(site), 0o644); err != nil {
		return nil, fmt.Errorf("nginx config: %w", err)
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(siteMain(dir, filepath.Join(o.LogDir, "nginx-error.log")+" info",
		filepath.Join(o.LogDir, "nginx-access-other.log"))), 0o644); err != nil {
		return nil, fmt.Errorf("nginx config: %w", err)
	}
	if out, err := exec.CommandContext(ctx, bin, "-t", "-p", dir, "-c", conf).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("nginx -t: %w\n%s", err, out)
	}
	p, err := procs.Start("nginx", bin, "-p", dir, "-c", conf, "-g", "daemon off;")
	if err != nil {
		return nil, err
	}
	err = WaitFor(ctx, p, startTimeout, listensOn(p, o.Listen))
	return p, err
}

// NginxMain is the minimal main config around one http-context file
// (Include), with every path inside Dir: the nginx fronts of the e2e suite
// and of the benches differ only in these fields.
type NginxMain struct {
	Dir     string // the prefix: the pid file, the temp paths and Include are in it
	Include string // the http-context file's name in Dir
	// ErrorLog and AccessLog are the values of those directives
	// ("<path> <level>", "off").
	ErrorLog, AccessLog string
	WorkerConnections   int
	RlimitNofile        int // worker_rlimit_nofile; 0 leaves nginx's default
}

// Render returns the config text.
func (m NginxMain) Render() string {
	var b strings.Builder
	if os.Geteuid() == 0 {
		b.WriteString("user root;\n") // workers must read the key file of this run
	}
	// master_process off: one process, so stopping it by PID (and the
	// parent-death signal when the test binary dies) leaves no worker
	// behind, and its CPU and memory are one PID's.
	b.WriteString("master_process off;\n")
	if m.RlimitNofile > 0 {
		fmt.Fprintf(&b, "worker_rlimit_nofile %d;\n", m.RlimitNofile)
	}
	fmt.Fprintf(&b, `pid %[1]s/nginx.pid;
error_log %[2]s;
events { worker_connections %[3]d; }
http {
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    access_log %[4]s;
    include %[1]s/%[5]s;
}
`, m.Dir, m.ErrorLog, m.WorkerConnections, m.AccessLog, m.Include)
	return b.String()
}

// siteMain is the main config of the suite's fronts around
// dir/wirekube-relay.conf.
func siteMain(dir, errorLog, accessLog string) string {
	return NginxMain{Dir: dir, Include: "wirekube-relay.conf", ErrorLog: errorLog, AccessLog: accessLog,
		WorkerConnections: 1024}.Render()
}
