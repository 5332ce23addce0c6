package stack

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var testFront = FrontOptions{Listen: "127.0.0.1:4443", CertFile: "/run/c.crt", KeyFile: "/run/c.key",
	ExtauthzHTTP: "127.0.0.1:19002", Bridge: "127.0.0.1:18081", LogDir: "/run/logs"}

func repoFile(t *testing.T, rel string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRenderIngressNginx: the shipped example renders to the controller's
// shape, and an annotation the rendering does not reproduce (a snippet)
// fails instead of being silently left out.
func TestRenderIngressNginx(t *testing.T) {
	example := repoFile(t, IngressNginxExample)
	got, err := RenderIngressNginx([]byte(example), testFront)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"location = /_external-auth-L3JlbGF5-Exact {",
		"auth_request        /_external-auth-L3JlbGF5-Exact;",
		"proxy_set_header            X-Original-URL          $scheme://$http_host$request_uri;",
		"auth_request_set $authHeader0 $upstream_http_x_wirekube_peer;",
		"proxy_set_header 'X-WireKube-Signature' $authHeader5;",
		"proxy_set_header 'X-WireKube-Client-Address' $authHeader6;",
		"proxy_set_header 'X-WireKube-Deny-Reason' $authHeader7;",
		"set $target http://127.0.0.1:19002/;",
		"server 127.0.0.1:18081;",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rendering lacks %q", want)
		}
	}
	// The controller's external-auth location passes no Upgrade and no
	// Connection (nginx then sends Connection: close): what extauthz's HTTP
	// mode must cope with.
	auth := got[strings.Index(got, "location = /_external-auth"):]
	auth = auth[:strings.Index(auth, "\n    }")]
	if strings.Contains(auth, "Upgrade") || strings.Contains(auth, "Connection") {
		t.Errorf("the external-auth location sets Upgrade or Connection:\n%s", auth)
	}
	snippet := strings.Replace(example, "annotations:\n",
		"annotations:\n    nginx.ingress.kubernetes.io/configuration-snippet: \"more_set_input_headers 'Authorization: ';\"\n", 1)
	if _, err := RenderIngressNginx([]byte(snippet), testFront); err == nil || !strings.Contains(err.Error(), "configuration-snippet") {
		t.Errorf("a snippet annotation rendered: %v", err)
	}
}

// TestRenderShippedFronts: every placeholder of the shipped Caddy and
// Traefik files occurs exactly once and is replaced.
func TestRenderShippedFronts(t *testing.T) {
	caddy, err := RenderCaddyfile(repoFile(t, CaddyConfigPath), testFront)
	if err != nil {
		t.Fatal(err)
	}
	s, d, err := RenderTraefik(repoFile(t, TraefikStaticPath), repoFile(t, TraefikDynamicPath), testFront, "/run/dyn.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, conf := range map[string]string{"Caddyfile": caddy, "traefik.yaml": s, "dynamic.yaml": d} {
		for _, shipped := range []string{":9002", ":8081", "/etc/caddy/", "/etc/traefik/", "/var/log/"} {
			if strings.Contains(conf, shipped) {
				t.Errorf("%s still holds %q after rendering", name, shipped)
			}
		}
	}
}

// TestTraefikVersionPinned: the harness's version is the one e2e/traefikbin
// builds.
func TestTraefikVersionPinned(t *testing.T) {
	gomod := repoFile(t, "e2e/traefikbin/go.mod")
	if !strings.Contains(gomod, "require github.com/traefik/traefik/v3 "+TraefikVersion+"\n") {
		t.Errorf("e2e/traefikbin/go.mod does not require traefik %s", TraefikVersion)
	}
}

// TestHeadRecorder: bytes pass unchanged both ways, every request head on
// a keep-alive connection is recorded, and a cut link refuses connections.
func TestHeadRecorder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%s %s", r.Method, r.Header.Get("X_Odd_Name"))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	rec, err := StartHeadRecorder(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	c, err := net.Dial("tcp", rec.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i, body := range []string{"", "hello"} {
		fmt.Fprintf(c, "POST /p%d HTTP/1.1\r\nHost: h\r\nX_Odd_Name: v%d\r\nX-Twice: a\r\nX-Twice: b\r\nContent-Length: %d\r\n\r\n%s", i, i, len(body), body)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if want := fmt.Sprintf("POST v%d", i); string(b) != want {
			t.Fatalf("response %q, want %q", b, want)
		}
	}
	heads := rec.Since(0)
	if len(heads) != 2 || heads[1].Target != "/p1" || len(heads[1].Header.Values("X-Twice")) != 2 ||
		heads[0].Header.Get("X_odd_name") != "v0" || heads[0].Header.Get("Host") != "h" {
		t.Fatalf("heads %+v", heads)
	}
	rec.SetTarget("")
	c2, err := net.Dial("tcp", rec.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Read(make([]byte, 1)); err == nil {
		t.Errorf("a cut link kept a connection open")
	}
}
