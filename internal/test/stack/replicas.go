package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/wirekube/relay-ws/internal/test/envoystandin"
)

// Replicas is a second bridge beside the stack's and one front of each kind
// in front of both (nginx upstream with two servers, the stand-in's bridge
// cluster with two endpoints): the drain hand-over test. The stack's own
// fronts keep going to the stack's bridge only.
type Replicas struct {
	Bridge2                     *Proc
	Bridge2Addr, Bridge2Metrics string
	// Extauthz2 is the second replica's own extauthz (ReplicaOptions
	// OwnExtauthz; nil otherwise): its revocation stream, as in a second
	// Pod. It answers no checks: the fronts call the stack's extauthz.
	Extauthz2              *Proc
	NginxAddr, StandinAddr string
	Nginx                  *Proc
	standinStop            context.CancelFunc
	standinDone            chan error
	standinLog             *os.File
}

// ReplicaOptions configure StartReplicasWith.
type ReplicaOptions struct {
	// BridgeArgs are flags of the second bridge beyond the stack's.
	BridgeArgs []string
	// OwnExtauthz gives the second bridge its own extauthz for its
	// revocation stream (as in another Pod) instead of the stack's.
	OwnExtauthz bool
}

// StartReplicas starts the second bridge (same flags as the stack's, its
// revocation stream to the stack's extauthz, plus extraBridgeArgs) and the
// two-bridge fronts. Close stops all of them.
func (s *Stack) StartReplicas(ctx context.Context, extraBridgeArgs ...string) (*Replicas, error) {
	return s.StartReplicasWith(ctx, ReplicaOptions{BridgeArgs: extraBridgeArgs})
}

// StartReplicasWith is StartReplicas with options. The second bridge is
// ready (its /readyz answers 200) only once its revocation stream is in
// sync.
func (s *Stack) StartReplicasWith(ctx context.Context, o ReplicaOptions) (*Replicas, error) {
	r := &Replicas{}
	if err := repickAddrs(&r.Bridge2Addr, &r.Bridge2Metrics, &r.NginxAddr); err != nil {
		return nil, err
	}
	revArgs := s.RevocationArgs()
	if o.OwnExtauthz {
		var err error
		if revArgs, err = r.startExtauthz2(ctx, s); err != nil {
			r.Close()
			return nil, err
		}
	}
	args := append([]string{
		"--listen=" + r.Bridge2Addr, "--metrics-listen=" + r.Bridge2Metrics, "--relay-addr=" + s.RelayAddr,
		"--log-format=json",
	}, append(append(revArgs, s.opts.BridgeArgs...), o.BridgeArgs...)...)
	p, err := s.procs.Start("bridge2", s.opts.Bins["wirekube-bridge"], args...)
	if err != nil {
		r.Close()
		return nil, err
	}
	r.Bridge2 = p
	if err := WaitFor(ctx, p, startTimeout, HTTPOK("http://"+r.Bridge2Metrics+"/readyz")); err != nil {
		r.Close()
		return nil, err
	}
	if err := r.startFronts(ctx, s); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// startExtauthz2 starts the second replica's extauthz (same kubeconfig and
// flags as the stack's, its own ports and revocation directory) and
// returns the bridge flags of its revocation stream.
func (r *Replicas) startExtauthz2(ctx context.Context, s *Stack) ([]string, error) {
	var grpcAddr, metrics string
	if err := repickAddrs(&grpcAddr, &metrics); err != nil {
		return nil, err
	}
	sock, secret, err := revocationDir()
	if err != nil {
		return nil, err
	}
	if r.Extauthz2, err = s.startSideExtauthz(ctx, "extauthz2", sideExtauthz{grpc: grpcAddr, metrics: metrics, sock: sock,
		secret: secret, keys: filepath.Join(filepath.Dir(secret), "identity-keys")}, nil); err != nil {
		return nil, err
	}
	// The fronts ask the stack's extauthz (startFronts), so its signature is
	// what this bridge must verify: the keys of that extauthz, as a shared
	// signing key would publish them in every replica.
	return []string{"--revocation-addr=" + sock, "--revocation-secret-file=" + secret,
		"--identity-keys-file=" + s.IdentityKeysFile()}, nil
}

func (r *Replicas) startFronts(ctx context.Context, s *Stack) error {
	cert, key, err := s.frontCert()
	if err != nil {
		return err
	}
	r.Nginx, err = StartNginx(ctx, s.procs, s.opts.RepoRoot, filepath.Join(s.opts.Dir, "nginx-replicas"), NginxOptions{
		Listen: r.NginxAddr, CertFile: cert, KeyFile: key, ExtauthzHTTP: s.ExtauthzHTTP,
		Bridge: s.BridgeAddr, ExtraBridges: []string{r.Bridge2Addr}, LogDir: s.procs.LogDir, // shared files: the log scan reads them too
	})
	if err != nil {
		return fmt.Errorf("nginx with two bridges: %w", err)
	}
	kp, err := loadKeyPair(cert, key)
	if err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(s.procs.LogDir, "envoy-standin-replicas.log"))
	if err != nil {
		return fmt.Errorf("standin log: %w", err)
	}
	srv, err := envoystandin.New(envoystandin.Options{
		TLS: kp, ExtauthzGRPC: s.ExtauthzGRPC, Bridge: s.BridgeAddr, ExtraBridges: []string{r.Bridge2Addr},
		Logger: slog.New(slog.NewJSONHandler(f, nil)).With("component", "envoy-standin-replicas"), AccessLog: f,
	})
	if err != nil {
		f.Close()
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Close()
		return fmt.Errorf("standin listen: %w", err)
	}
	r.StandinAddr = ln.Addr().String()
	runCtx, cancel := context.WithCancel(context.Background())
	r.standinStop, r.standinDone, r.standinLog = cancel, make(chan error, 1), f
	go func() { r.standinDone <- srv.Serve(runCtx, ln) }() // owned: Close waits
	return nil
}

// Close stops the second bridge, the nginx and the stand-in of the
// replicas (not the stack's bridge).
func (r *Replicas) Close() error {
	var errs []error
	if r.standinStop != nil {
		r.standinStop()
		<-r.standinDone
		r.standinLog.Close()
		r.standinStop = nil
	}
	for _, p := range []*Proc{r.Nginx, r.Bridge2, r.Extauthz2} {
		if p != nil {
			errs = append(errs, p.Stop(startTimeout))
		}
	}
	return errors.Join(errs...)
}

// sideExtauthz are the listeners and revocation files of an extauthz
// beside the stack's (http empty: no HTTP listener).
type sideExtauthz struct{ grpc, http, metrics, sock, secret, keys string }

// startSideExtauthz starts an extauthz of its own beside the stack's (the
// stack's kubeconfig and flags, then extra) and waits until it is ready.
// The Proc is returned also when it never got ready, for Close.
func (s *Stack) startSideExtauthz(ctx context.Context, name string, x sideExtauthz, extra []string) (*Proc, error) {
	args := append([]string{
		"--grpc-listen=" + x.grpc, "--http-listen=" + x.http, "--metrics-listen=" + x.metrics,
		"--kubeconfig=" + s.opts.ExtauthzKubeconfig, "--revocation-listen=" + x.sock,
		"--revocation-secret-file=" + x.secret, "--identity-keys-file=" + x.keys, "--log-format=json",
	}, append(append([]string(nil), s.opts.ExtauthzArgs...), extra...)...)
	p, err := s.procs.Start(name, s.opts.Bins["wirekube-extauthz"], args...)
	if err != nil {
		return nil, err
	}
	return p, WaitFor(ctx, p, startTimeout, HTTPOK("http://"+x.metrics+"/readyz"))
}
