package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/wirekube/relay-ws/envoy"
)

// EnvoyConfigPath is the shipped Envoy config the suite runs when an envoy
// binary is on PATH.
const EnvoyConfigPath = "envoy/envoy.yaml"

// RealEnvoy reports the envoy binary on PATH, or "" when there is none (then
// the suite uses the stand-in).
func RealEnvoy() string {
	p, err := exec.LookPath("envoy")
	if err != nil {
		return ""
	}
	return p
}

// startEnvoy runs real Envoy with envoy/envoy.yaml, its ports and
// certificate paths substituted through envoy.Overrides.
func (s *Stack) startEnvoy(ctx context.Context, bin string) error {
	if s.standinLn != nil { // Envoy binds the front's port itself
		s.standinLn.Close()
		s.standinLn = nil
	}
	cert, key, err := s.frontCert()
	if err != nil {
		return err
	}
	b, err := envoy.Load(filepath.Join(s.opts.RepoRoot, EnvoyConfigPath))
	if err != nil {
		return err
	}
	admin, err := FreeAddr()
	if err != nil {
		return err
	}
	stats, err := FreeAddr()
	if err != nil {
		return err
	}
	o := envoy.Overrides{
		Admin:     admin,
		Listeners: map[string]string{"relay_tls": s.StandinAddr, "envoy_metrics": stats},
		Clusters:  map[string]string{"extauthz": s.ExtauthzGRPC, "bridge": s.BridgeAddr, "envoy_admin": admin},
		CertFile:  cert, KeyFile: key,
	}
	if err := o.Apply(b); err != nil {
		return err
	}
	js, err := envoy.Marshal(b)
	if err != nil {
		return err
	}
	conf := filepath.Join(s.opts.Dir, "envoy.json")
	if err := os.WriteFile(conf, js, 0o644); err != nil {
		return fmt.Errorf("envoy config: %w", err)
	}
	p, err := s.procs.Start("envoy", bin, "-c", conf, "--log-level", "info", "--base-id", fmt.Sprint(os.Getpid()))
	if err != nil {
		return err
	}
	s.Envoy = p
	return WaitFor(ctx, p, 30*time.Second, func(context.Context) error { return dialTCP(s.StandinAddr) })
}
