package stack

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNginxAccessLogHasNoClientText: the shipped access log format uses no
// variable a client writes freely (no token in a log by
// construction). Only the listed variables may appear; $wirekube_route is a
// map of $uri to fixed names, never $uri itself.
func TestNginxAccessLogHasNoClientText(t *testing.T) {
	shipped, err := os.ReadFile(filepath.Join("..", "..", "..", NginxConfigPath))
	if err != nil {
		t.Fatal(err)
	}
	format := logFormat(t, string(shipped), "wirekube_relay")
	allowed := map[string]bool{
		"$remote_addr": true, "$time_local": true, "$request_method": true, "$wirekube_route": true,
		"$status": true, "$body_bytes_sent": true, "$request_time": true,
		"$wk_status": true, "$wk_peer": true, "$wk_identity": true,
		// Set by extauthz, the bridge or nginx's own error page (issue
		// 22): a reason code, never a client's text.
		"$sent_http_x_wirekube_deny_reason": true,
		// X-WireKube-Client-Address of extauthz's allow: an
		// address it parsed, "invalid", or empty; never the client's text.
		"$wk_client_address": true,
		// nginx's own id; the snippet overwrites any client X-Request-Id.
		"$request_id": true,
	}
	vars := regexp.MustCompile(`\$\{?[a-z_0-9]+`).FindAllString(format, -1)
	if len(vars) < 5 {
		t.Fatalf("log format %q: too few variables to be the real one", format)
	}
	for _, v := range vars {
		if !allowed[strings.Replace(v, "{", "", 1)] {
			t.Errorf("access log format uses %s: a client could put a token there", v)
		}
	}
	// The route map yields only fixed names.
	m := regexp.MustCompile(`(?s)map \$uri \$wirekube_route \{(.*?)\}`).FindStringSubmatch(string(shipped))
	if m == nil {
		t.Fatal("no map $uri $wirekube_route")
	}
	for _, line := range strings.Split(m[1], "\n") {
		if f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), ";")); len(f) == 2 && strings.Contains(f[1], "$") {
			t.Errorf("route map yields a variable: %q", line)
		}
	}
}

// logFormat returns the concatenated quoted parts of a log_format directive.
func logFormat(t *testing.T, conf, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)log_format\s+` + name + `\s+(.*?);`).FindStringSubmatch(conf)
	if m == nil {
		t.Fatalf("no log_format %s", name)
	}
	var out strings.Builder
	for _, q := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(m[1], -1) {
		out.WriteString(q[1])
	}
	return out.String()
}
