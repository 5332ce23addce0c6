package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// CaddyConfigPath is the Caddyfile users deploy; the suite runs it with only
// the substitutions of RenderCaddyfile.
const CaddyConfigPath = "deploy/caddy/Caddyfile"

// RenderCaddyfile substitutes the deployment-specific values of the shipped
// Caddyfile.
func RenderCaddyfile(shipped string, o FrontOptions) (string, error) {
	return substitute("Caddyfile", shipped, [][2]string{
		{"https://relay.example.com:443 {", "https://" + o.Listen + " {"},
		{"tls /etc/caddy/tls/tls.crt /etc/caddy/tls/tls.key", "tls " + o.CertFile + " " + o.KeyFile},
		{"forward_auth 127.0.0.1:9002 {", "forward_auth " + o.ExtauthzHTTP + " {"},
		{"reverse_proxy 127.0.0.1:8081 {", "reverse_proxy " + o.Bridge + " {"},
		{"reverse_proxy 127.0.0.1:8081\n", "reverse_proxy " + o.Bridge + "\n"},
		{"/var/log/caddy/wirekube-relay.access.log", filepath.Join(o.LogDir, "caddy-access.log")},
	})
}

// CaddyVersion reports `caddy version` of bin (the first word).
func CaddyVersion(ctx context.Context, bin string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return "", fmt.Errorf("caddy version: %w", err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return "", fmt.Errorf("caddy version: empty output")
	}
	return f[0], nil
}

// StartCaddy runs the system caddy (Debian's package) with the shipped
// Caddyfile, its storage and config dirs inside dir, and waits until it
// listens.
func StartCaddy(ctx context.Context, procs *Procs, repoRoot, dir string, o FrontOptions) (*Proc, error) {
	bin, err := lookBin("caddy", "/usr/bin/caddy")
	if err != nil {
		return nil, fmt.Errorf("caddy (apt-get install caddy): %w", err)
	}
	shipped, err := os.ReadFile(filepath.Join(repoRoot, CaddyConfigPath))
	if err != nil {
		return nil, fmt.Errorf("caddy config: %w", err)
	}
	conf, err := RenderCaddyfile(string(shipped), o)
	if err != nil {
		return nil, err
	}
	path, err := writeConfig(dir, "Caddyfile", conf)
	if err != nil {
		return nil, err
	}
	// XDG dirs: caddy keeps its data and autosaved config there, not in $HOME.
	env := []string{"XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config")}
	validate := exec.CommandContext(ctx, bin, "validate", "--adapter", "caddyfile", "--config", path)
	validate.Env = append(os.Environ(), env...)
	if out, err := validate.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("caddy validate: %w\n%s", err, out)
	}
	p, err := procs.StartEnv("caddy", bin, env, "run", "--adapter", "caddyfile", "--config", path)
	if err != nil {
		return nil, err
	}
	return p, WaitFor(ctx, p, startTimeout, listensOn(p, o.Listen))
}
