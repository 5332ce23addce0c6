package stack

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// TraefikVersion is the Traefik release of the front matrix; e2e/traefikbin
// pins the same version (a test keeps them equal).
const TraefikVersion = "v3.6.12"

// EnvTraefik points the harness at a traefik binary the user has.
const EnvTraefik = "WIREKUBE_E2E_TRAEFIK"

// Traefik's shipped configuration: static and dynamic (file provider).
const (
	TraefikStaticPath  = "deploy/traefik/traefik.yaml"
	TraefikDynamicPath = "deploy/traefik/dynamic.yaml"
)

// FindTraefik returns $WIREKUBE_E2E_TRAEFIK, else the cached build
// e2e/.cache/traefik/<version>/traefik, building it from the Go module proxy
// into that cache when missing (about 8 minutes on 2 cores when cold).
func FindTraefik(ctx context.Context, repoRoot string, out io.Writer) (string, error) {
	if p := os.Getenv(EnvTraefik); p != "" {
		return p, checkExecutable(p)
	}
	unlock, err := lockBuildCache(repoRoot, "traefik")
	if err != nil {
		return "", fmt.Errorf("traefik: %w", err)
	}
	defer unlock()
	cache := filepath.Join(repoRoot, "e2e", ".cache", "traefik", TraefikVersion)
	bin := filepath.Join(cache, "traefik")
	if checkExecutable(bin) == nil {
		return bin, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("traefik: %w", err)
	}
	ldflags := "-X github.com/traefik/traefik/v3/pkg/version.Version=" + TraefikVersion
	if err := goBuild(ctx, filepath.Join(repoRoot, "e2e", "traefikbin"), bin,
		"github.com/traefik/traefik/v3/cmd/traefik", ldflags, out); err != nil {
		return "", err
	}
	return bin, checkExecutable(bin)
}

func checkExecutable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", p)
	}
	return nil
}

// RenderTraefik substitutes the deployment-specific values of the shipped
// static and dynamic configuration.
func RenderTraefik(static, dynamic string, o FrontOptions, dynamicPath string) (string, string, error) {
	s, err := substitute("traefik.yaml", static, [][2]string{
		{`address: ":443"`, `address: "` + o.Listen + `"`},
		{"/etc/traefik/dynamic.yaml", dynamicPath},
		{"/var/log/traefik/wirekube-relay.access.log", filepath.Join(o.LogDir, "traefik-access.log")},
	})
	if err != nil {
		return "", "", err
	}
	d, err := substitute("dynamic.yaml", dynamic, [][2]string{
		// Clients dial 127.0.0.1 (the Host rule ignores the port).
		{"Host(`relay.example.com`) && Path(`/relay`)", "Host(`127.0.0.1`) && Path(`/relay`)"},
		{"Host(`relay.example.com`) && Path(`/healthz`)", "Host(`127.0.0.1`) && Path(`/healthz`)"},
		{`address: "http://127.0.0.1:9002/"`, `address: "http://` + o.ExtauthzHTTP + `/"`},
		{`url: "http://127.0.0.1:8081"`, `url: "http://` + o.Bridge + `"`},
		{"/etc/traefik/tls/tls.crt", o.CertFile},
		{"/etc/traefik/tls/tls.key", o.KeyFile},
	})
	return s, d, err
}

// StartTraefik runs bin with the shipped configuration and waits until it
// listens.
func StartTraefik(ctx context.Context, procs *Procs, repoRoot, dir, bin string, o FrontOptions) (*Proc, error) {
	static, err := os.ReadFile(filepath.Join(repoRoot, TraefikStaticPath))
	if err != nil {
		return nil, fmt.Errorf("traefik config: %w", err)
	}
	dynamic, err := os.ReadFile(filepath.Join(repoRoot, TraefikDynamicPath))
	if err != nil {
		return nil, fmt.Errorf("traefik config: %w", err)
	}
	dynPath := filepath.Join(dir, "dynamic.yaml")
	s, d, err := RenderTraefik(string(static), string(dynamic), o, dynPath)
	if err != nil {
		return nil, err
	}
	if _, err := writeConfig(dir, "dynamic.yaml", d); err != nil {
		return nil, err
	}
	conf, err := writeConfig(dir, "traefik.yaml", s)
	if err != nil {
		return nil, err
	}
	p, err := procs.Start("traefik", bin, "--configfile="+conf)
	if err != nil {
		return nil, err
	}
	return p, WaitFor(ctx, p, startTimeout, listensOn(p, o.Listen))
}

var _ = exec.Command
