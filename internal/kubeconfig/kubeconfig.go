// Package kubeconfig loads a client configuration by kubectl's rules, for
// the operator tools (wirekube-relay-token, wirekube-relay-probe
// sessions). The servers never link it: they run in-cluster.
package kubeconfig

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrNone: no kubeconfig file and not in a Pod.
var ErrNone = errors.New("kubeconfig: none found: pass --kubeconfig, set KUBECONFIG, or run in a Pod")

// Load resolves path (empty: $KUBECONFIG, then ~/.kube/config, then the
// in-cluster config) and context (empty: the current context), and sets
// userAgent on the REST config. The ClientConfig is returned too, for the
// context's namespace.
func Load(path, context, userAgent string) (*rest.Config, clientcmd.ClientConfig, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	rc, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, nil, ErrNone
		}
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.UserAgent = userAgent
	return rc, cc, nil
}
