package stack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeChildEnv) != "" {
		os.Exit(runFakeChild(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

func TestRenderNginxConfig(t *testing.T) {
	shipped, err := os.ReadFile(filepath.Join("..", "..", "..", NginxConfigPath))
	if err != nil {
		t.Fatal(err)
	}
	o := NginxOptions{Listen: "127.0.0.1:1", CertFile: "/c.crt", KeyFile: "/c.key",
		ExtauthzHTTP: "127.0.0.1:2", Bridge: "127.0.0.1:3", LogDir: "/logs"}
	got, err := RenderNginxConfig(string(shipped), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"listen 127.0.0.1:1 ssl backlog=4096;", "ssl_certificate     /c.crt;", "server 127.0.0.1:2;",
		"server 127.0.0.1:3 max_fails=1 fail_timeout=5s;", "/logs/nginx-relay-error.log crit;"} {
		if !strings.Contains(got, want) {
			t.Errorf("rendered config lacks %q", want)
		}
	}
	t.Run("two bridges", func(t *testing.T) {
		o := o
		o.ExtraBridges = []string{"127.0.0.1:4"}
		got, err := RenderNginxConfig(string(shipped), o)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got, "server 127.0.0.1:3 max_fails=1 fail_timeout=5s;\n    server 127.0.0.1:4 max_fails=1 fail_timeout=5s;") {
			t.Errorf("rendered upstream lacks both bridges:\n%s", got)
		}
	})
	t.Run("missing placeholder fails", func(t *testing.T) {
		broken := strings.Replace(string(shipped), "server 127.0.0.1:8081 ", "server 10.0.0.1:8081 ", 1)
		if _, err := RenderNginxConfig(broken, o); err == nil {
			t.Error("rendered a config without the bridge placeholder")
		}
	})
}

func TestRenderNginxConfigKeepsSafetyLines(t *testing.T) {
	shipped, err := os.ReadFile(filepath.Join("..", "..", "..", NginxConfigPath))
	if err != nil {
		t.Fatal(err)
	}
	// The lines the suite relies on for scenarios 2, 6 and 8.
	for _, want := range []string{
		"proxy_set_header Authorization \"\";",
		"auth_request_set $wk_status           $upstream_status;",
		"error_page 401 403 500 = @wirekube_deny;",
		"error_page 502 504 = @wirekube_bridge_unavailable;",
		"add_header X-WireKube-Deny-Reason bridge_unavailable always;",
		"proxy_pass_request_body off;",
		"proxy_set_header X-Original-URI    $request_uri;",
		"proxy_http_version 1.1;",
	} {
		if !strings.Contains(string(shipped), want) {
			t.Errorf("%s lacks %q", NginxConfigPath, want)
		}
	}
}

// TestNginxMainPassesNginxT: the main config of the suite's fronts and of
// the benches (RlimitNofile set) is one the real nginx accepts, and it
// includes the http-context file (a directive nginx refuses outside the
// http block is put there to show it is read).
func TestNginxMainPassesNginxT(t *testing.T) {
	bin, err := NginxBinary()
	if err != nil {
		t.Fatalf("%v (make nginx)", err)
	}
	for _, m := range []NginxMain{
		{Include: "wirekube-relay.conf", ErrorLog: "stderr info", AccessLog: "off", WorkerConnections: 1024},
		{Include: "site.conf", ErrorLog: "stderr crit", AccessLog: "off", WorkerConnections: 4096, RlimitNofile: 8192},
	} {
		t.Run(m.Include, func(t *testing.T) {
			m.Dir = t.TempDir()
			text := m.Render()
			if got := strings.Contains(text, "worker_rlimit_nofile 8192;\n"); got != (m.RlimitNofile != 0) {
				t.Errorf("worker_rlimit_nofile line present %v, want %v:\n%s", got, m.RlimitNofile != 0, text)
			}
			// server_tokens is valid only in http, server or location.
			writeFile(t, filepath.Join(m.Dir, m.Include), "server_tokens off;\n")
			conf := filepath.Join(m.Dir, "nginx.conf")
			writeFile(t, conf, text)
			if out, err := exec.Command(bin, "-t", "-p", m.Dir, "-c", conf).CombinedOutput(); err != nil {
				t.Fatalf("nginx -t: %v\n%s\n%s", err, out, text)
			}
		})
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
