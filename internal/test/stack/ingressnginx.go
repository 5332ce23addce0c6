package stack

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// IngressNginxExample is the Ingress the rendering follows.
const IngressNginxExample = "manifests/examples/ingress-nginx/ingress.yaml"

//go:embed fronts/ingress-nginx.conf.tmpl
var ingressNginxTemplate string

var ingressNginxTmpl = template.Must(template.New("ingress-nginx").Option("missingkey=error").Parse(ingressNginxTemplate))

// IngressNginxLogFormat is the log-format-upstream docs/proxy-snippets.md gives for
// the controller ConfigMap: the controller's default with "$request" (the
// request line, query string included) replaced by the method and the
// Ingress path ($location_path, empty outside a rule), so a token a client put
// in the URL is never written.
const IngressNginxLogFormat = `$remote_addr - $remote_user [$time_local] "$request_method $location_path" $status ` +
	`$body_bytes_sent "$http_referer" "$http_user_agent" $request_length $request_time [$proxy_upstream_name] ` +
	`[$proxy_alternative_upstream_name] $upstream_addr $upstream_response_length $upstream_response_time $upstream_status $req_id`

const annotationPrefix = "nginx.ingress.kubernetes.io/"

// renderedAnnotations are the annotations the rendering reproduces. Any
// other annotation on the example (a snippet, for one) fails the rendering,
// so the suite never silently tests something else than what ships.
var renderedAnnotations = map[string]bool{
	"auth-url": true, "auth-response-headers": true, "proxy-read-timeout": true,
	"proxy-send-timeout": true, "proxy-body-size": true,
	"ssl-redirect": true, // only redirects port 80, which the matrix does not serve
}

type ingressNginxValues struct {
	Listen, CertFile, KeyFile, Bridge, AccessLog, ErrorLog, ErrorLogLevel, LogFormat string
	Host, Path, AuthPath, AuthHost, AuthURL, BodySize, ReadTimeout, SendTimeout      string
	ResponseHeaders                                                                  []authResponseHeader
}

type authResponseHeader struct {
	Index     int
	Name, Var string
}

var seconds = regexp.MustCompile(`^[0-9]+$`)

// RenderIngressNginx renders the server block for the example Ingress.
func RenderIngressNginx(ingressYAML []byte, o FrontOptions) (string, error) {
	var ing networkingv1.Ingress
	if err := yaml.UnmarshalStrict(ingressYAML, &ing); err != nil {
		return "", fmt.Errorf("ingress-nginx example: %w", err)
	}
	if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].HTTP == nil || len(ing.Spec.Rules[0].HTTP.Paths) != 1 {
		return "", fmt.Errorf("ingress-nginx example: want one rule with one path")
	}
	rule := ing.Spec.Rules[0]
	p := rule.HTTP.Paths[0]
	if p.PathType == nil || *p.PathType != networkingv1.PathTypeExact {
		return "", fmt.Errorf("ingress-nginx example: the rendering covers pathType Exact only")
	}
	ann := map[string]string{}
	for k, v := range ing.Annotations {
		name, ok := strings.CutPrefix(k, annotationPrefix)
		if !ok || !renderedAnnotations[name] {
			return "", fmt.Errorf("ingress-nginx example: annotation %s is not rendered by the suite", k)
		}
		ann[name] = v
	}
	authURL, err := url.Parse(ann["auth-url"])
	if err != nil || authURL.Host == "" {
		return "", fmt.Errorf("ingress-nginx example: auth-url %q", ann["auth-url"])
	}
	v := ingressNginxValues{
		Listen: o.Listen, CertFile: o.CertFile, KeyFile: o.KeyFile, Bridge: o.Bridge,
		AccessLog: filepath.Join(o.LogDir, "ingress-nginx-access.log"), ErrorLog: filepath.Join(o.LogDir, "ingress-nginx-error.log"),
		ErrorLogLevel: "crit", LogFormat: IngressNginxLogFormat,
		Host: rule.Host, Path: p.Path,
		// buildAuthLocation: base64url of the path without "=", then the pathType.
		AuthPath: "/_external-auth-" + strings.TrimRight(base64.URLEncoding.EncodeToString([]byte(p.Path)), "=") + "-" + string(*p.PathType),
		AuthHost: authURL.Hostname(),
		// The Service name resolves to extauthz; here it is its loopback address.
		AuthURL:     "http://" + o.ExtauthzHTTP + authURL.RequestURI(),
		BodySize:    ann["proxy-body-size"],
		ReadTimeout: orDefault(ann["proxy-read-timeout"], "60"), SendTimeout: orDefault(ann["proxy-send-timeout"], "60"),
	}
	for _, t := range []string{v.ReadTimeout, v.SendTimeout} {
		if !seconds.MatchString(t) {
			return "", fmt.Errorf("ingress-nginx example: timeout %q is not whole seconds", t)
		}
	}
	for i, h := range splitList(ann["auth-response-headers"]) {
		v.ResponseHeaders = append(v.ResponseHeaders, authResponseHeader{
			Index: i, Name: h, Var: strings.ReplaceAll(strings.ToLower(h), "-", "_")})
	}
	var buf bytes.Buffer
	if err := ingressNginxTmpl.Execute(&buf, v); err != nil {
		return "", fmt.Errorf("ingress-nginx rendering: %w", err)
	}
	return buf.String(), nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// StartIngressNginx runs Debian's nginx with the rendering of the example
// Ingress and waits until it listens.
func StartIngressNginx(ctx context.Context, procs *Procs, repoRoot, dir string, o FrontOptions) (*Proc, error) {
	bin, err := NginxBinary()
	if err != nil {
		return nil, fmt.Errorf("nginx (apt-get install nginx): %w", err)
	}
	ingressYAML, err := os.ReadFile(filepath.Join(repoRoot, IngressNginxExample))
	if err != nil {
		return nil, fmt.Errorf("ingress-nginx example: %w", err)
	}
	site, err := RenderIngressNginx(ingressYAML, o)
	if err != nil {
		return nil, err
	}
	if _, err := writeConfig(filepath.Join(dir, "logs"), ".keep", ""); err != nil {
		return nil, err
	}
	if _, err := writeConfig(dir, "wirekube-relay.conf", site); err != nil {
		return nil, err
	}
	conf, err := writeConfig(dir, "nginx.conf", siteMain(dir,
		filepath.Join(o.LogDir, "ingress-nginx-main-error.log")+" crit", "off"))
	if err != nil {
		return nil, err
	}
	return startNginxProc(ctx, procs, "ingress-nginx", bin, dir, conf, o.Listen)
}

// startNginxProc checks conf with `nginx -t` and runs nginx in the
// foreground (one process: stopped by PID like the others).
func startNginxProc(ctx context.Context, procs *Procs, name, bin, dir, conf, listen string) (*Proc, error) {
	if out, err := exec.CommandContext(ctx, bin, "-t", "-p", dir, "-c", conf).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s: nginx -t: %w\n%s", name, err, out)
	}
	p, err := procs.Start(name, bin, "-p", dir, "-c", conf, "-g", "daemon off;")
	if err != nil {
		return nil, err
	}
	return p, WaitFor(ctx, p, startTimeout, listensOn(p, listen))
}
