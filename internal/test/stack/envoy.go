package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
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
// certificate paths substituted through envoyconfig.Overrides. A start whose port
// was taken meanwhile is retried on fresh ports (Envoy is the last component
// started, so nothing has read StandinAddr yet).
func (s *Stack) startEnvoy(ctx context.Context, bin string) error {
	if s.standinLn != nil { // Envoy binds the front's port itself
		s.standinLn.Close()
		s.standinLn = nil
	}
	cert, key, err := s.frontCert()
	if err != nil {
		return err
	}
	repick := func() error { return repickAddrs(&s.StandinAddr) }
	return retryPorts(ctx, s.procs.Out, "envoy", repick, func(ctx context.Context) error {
		conf, err := s.writeEnvoyConfig(cert, key)
		if err != nil {
			return err
		}
		p, err := s.procs.Start("envoy", bin, "-c", conf, "--log-level", "info", "--base-id", fmt.Sprint(os.Getpid()))
		if err != nil {
			return err
		}
		s.Envoy = p
		return addrInUse(p, WaitFor(ctx, p, startTimeout, listensOn(p, s.StandinAddr)))
	})
}

// writeEnvoyConfig writes the shipped config with this run's addresses (the
// admin and stats ports picked afresh) and returns its path.
func (s *Stack) writeEnvoyConfig(cert, key string) (string, error) {
	b, err := envoyconfig.Load(filepath.Join(s.opts.RepoRoot, EnvoyConfigPath))
	if err != nil {
		return "", err
	}
	var admin, stats string
	if err := repickAddrs(&admin, &stats); err != nil {
		return "", err
	}
	o := envoyconfig.Overrides{
		Admin:     admin,
		Listeners: map[string]string{"relay_tls": s.StandinAddr, "envoy_metrics": stats},
		Clusters:  map[string]string{"extauthz": s.ExtauthzGRPC, "bridge": s.BridgeAddr, "envoy_admin": admin},
		CertFile:  cert, KeyFile: key,
	}
	if err := o.Apply(b); err != nil {
		return "", err
	}
	js, err := envoyconfig.Marshal(b)
	if err != nil {
		return "", err
	}
	conf := filepath.Join(s.opts.Dir, "envoy.json")
	if err := os.WriteFile(conf, js, 0o644); err != nil {
		return "", fmt.Errorf("envoy config: %w", err)
	}
	return conf, nil
}
