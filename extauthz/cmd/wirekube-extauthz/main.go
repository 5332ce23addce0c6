// Command wirekube-extauthz is the WireKube relay's external authorization
// service: Envoy ext_authz over gRPC and plain HTTP forward-auth. See
// docs/extauthz.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/wirekube/relay-ws/extauthz"
	"github.com/wirekube/relay-ws/internal/cli"
)

func main() { os.Exit(cli.Main("wirekube-extauthz", run, nil)) }

// run parses args, builds the clients and serves until ctx is done. Logs go
// to stderr; --version prints to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts := extauthz.DefaultOptions()
	if done, err := cli.ParseService("wirekube-extauthz", &opts, args, stdout, stderr); done || err != nil {
		return err
	}
	xcfg, err := opts.Complete()
	if err != nil {
		return err
	}
	log, reg, err := cli.StartService("wirekube-extauthz", stderr, opts.LogFormat, opts.LogLevel)
	if err != nil {
		return err
	}
	cfg, err := restConfig(opts.Kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	cfg.QPS = float32(opts.KubeAPIQPS)
	cfg.Burst = opts.KubeAPIBurst
	cfg.UserAgent = "wirekube-extauthz"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	// TokenReviews get no client-side rate limiter: the review gate applies
	// --kube-api-qps itself, so no review slot is held while waiting.
	rcfg := rest.CopyConfig(cfg)
	rcfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	reviews, err := kubernetes.NewForConfig(rcfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	clients := extauthz.NewClients(kube, dyn)
	clients.Reviews = reviews.AuthenticationV1()
	return extauthz.Run(ctx, xcfg, clients, reg, log)
}

// restConfig loads path when set; otherwise the in-cluster config, then the
// default loading rules (KUBECONFIG, ~/.kube/config).
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err == nil {
			return cfg, nil
		}
		if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}
