package stack

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/wirekube/relay-ws/internal/room"
)

// Pod is one gateway Pod of its own beside the stack: its own extauthz and
// bridge side by side (the bridge's revocation stream and identity keys from
// that extauthz, as the Pod's emptyDir shares them), and in front of them
// the shipped nginx configuration and the Envoy stand-in. The stack's own
// processes are not touched.
type Pod struct {
	Extauthz, Bridge, Nginx                     *Proc
	Standin                                     *Standin
	ExtauthzGRPC, ExtauthzHTTP, ExtauthzMetrics string
	BridgeAddr, BridgeMetrics, NginxAddr        string
}

// PodOptions configure StartPod.
type PodOptions struct {
	// Name tells this Pod's processes, logs and nginx prefix apart.
	Name string
	// ExtauthzArgs and BridgeArgs are flags beyond the stack's own.
	ExtauthzArgs, BridgeArgs []string
	// ReadRoom gives extauthz --bridge-room-url, the bridge's GET /room
	// on its metrics listener (the full-mark bounce drawn by extauthz).
	ReadRoom bool
}

// StartPod starts a Pod: extauthz (same kubeconfig and flags as the
// stack's, its own ports and revocation directory), then the bridge, then
// nginx and the stand-in in front of both. Close stops all of them.
func (s *Stack) StartPod(ctx context.Context, o PodOptions) (*Pod, error) {
	p := &Pod{}
	if err := repickAddrs(&p.ExtauthzGRPC, &p.ExtauthzHTTP, &p.ExtauthzMetrics,
		&p.BridgeAddr, &p.BridgeMetrics, &p.NginxAddr); err != nil {
		return nil, err
	}
	sock, secret, err := revocationDir()
	if err != nil {
		return nil, err
	}
	keys := filepath.Join(filepath.Dir(secret), "identity-keys")
	for _, step := range []func() error{
		func() error { return p.startExtauthz(ctx, s, o, sock, secret, keys) },
		func() error { return p.startBridge(ctx, s, o, sock, secret, keys) },
		func() error { return p.startFronts(ctx, s, o) },
	} {
		if err := step(); err != nil {
			return nil, errors.Join(err, p.Close())
		}
	}
	return p, nil
}

func (p *Pod) startExtauthz(ctx context.Context, s *Stack, o PodOptions, sock, secret, keys string) error {
	var args []string
	if o.ReadRoom {
		args = append(args, "--bridge-room-url=http://"+p.BridgeMetrics+room.Path)
	}
	var err error
	p.Extauthz, err = s.startSideExtauthz(ctx, "extauthz-"+o.Name, sideExtauthz{grpc: p.ExtauthzGRPC, http: p.ExtauthzHTTP,
		metrics: p.ExtauthzMetrics, sock: sock, secret: secret, keys: keys}, append(args, o.ExtauthzArgs...))
	return err
}

func (p *Pod) startBridge(ctx context.Context, s *Stack, o PodOptions, sock, secret, keys string) error {
	args := append([]string{
		"--listen=" + p.BridgeAddr, "--metrics-listen=" + p.BridgeMetrics, "--relay-addr=" + s.RelayAddr,
		"--revocation-addr=" + sock, "--revocation-secret-file=" + secret, "--identity-keys-file=" + keys,
		"--log-format=json",
	}, append(append([]string(nil), s.opts.BridgeArgs...), o.BridgeArgs...)...)
	proc, err := s.procs.Start("bridge-"+o.Name, s.opts.Bins["wirekube-bridge"], args...)
	if err != nil {
		return err
	}
	p.Bridge = proc
	return WaitFor(ctx, proc, startTimeout, HTTPOK("http://"+p.BridgeMetrics+"/readyz"))
}

func (p *Pod) startFronts(ctx context.Context, s *Stack, o PodOptions) error {
	cert, key, err := s.frontCert()
	if err != nil {
		return err
	}
	p.Nginx, err = StartNginx(ctx, s.procs, s.opts.RepoRoot, filepath.Join(s.opts.Dir, "nginx-"+o.Name), NginxOptions{
		Listen: p.NginxAddr, CertFile: cert, KeyFile: key, ExtauthzHTTP: p.ExtauthzHTTP, Bridge: p.BridgeAddr,
		LogDir: s.procs.LogDir, // shared files: the log scan reads them too
	})
	if err != nil {
		return fmt.Errorf("nginx of pod %s: %w", o.Name, err)
	}
	p.Standin, err = StartStandin(FrontOptions{CertFile: cert, KeyFile: key, Bridge: p.BridgeAddr, LogDir: s.procs.LogDir},
		p.ExtauthzGRPC, "envoy-standin-"+o.Name+".log")
	if err != nil {
		return fmt.Errorf("stand-in of pod %s: %w", o.Name, err)
	}
	return nil
}

// Close stops the Pod's fronts, its bridge and its extauthz.
func (p *Pod) Close() error {
	var errs []error
	if p.Standin != nil {
		errs = append(errs, p.Standin.Close())
		p.Standin = nil
	}
	for _, proc := range []*Proc{p.Nginx, p.Bridge, p.Extauthz} {
		if proc != nil {
			errs = append(errs, proc.Stop(startTimeout))
		}
	}
	p.Nginx, p.Bridge, p.Extauthz = nil, nil, nil
	return errors.Join(errs...)
}
