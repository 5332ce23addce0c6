package relaytoken

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wirekube/relay-ws/internal/kubeconfig"
)

// Clients are the narrow API clients the tool needs.
type Clients struct {
	// Core reads and writes ServiceAccounts, their tokens and Secrets.
	Core corev1client.CoreV1Interface
	// Dynamic reads WireKubePeers (no typed client exists for the CRD).
	Dynamic dynamic.Interface
	// Namespace is the kubeconfig context's namespace; empty when the
	// context sets none (or there is no kubeconfig).
	Namespace string
}

// KubeOptions select the cluster the way kubectl does.
type KubeOptions struct {
	// Kubeconfig is an explicit file; empty means $KUBECONFIG, then
	// ~/.kube/config, then the in-cluster config.
	Kubeconfig string
	// Context overrides the kubeconfig's current context.
	Context string
}

// NewClients builds Clients from the kubeconfig rules of kubectl.
func NewClients(o KubeOptions) (Clients, error) {
	rc, cc, err := kubeconfig.Load(o.Kubeconfig, o.Context, "wirekube-relay-token")
	if err != nil {
		return Clients{}, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return Clients{}, fmt.Errorf("kubernetes client: %w", err)
	}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return Clients{}, fmt.Errorf("dynamic client: %w", err)
	}
	return Clients{Core: cs.CoreV1(), Dynamic: dc, Namespace: contextNamespace(cc, o.Context)}, nil
}

// contextNamespace is the namespace the selected kubeconfig context sets,
// or "" (kubectl would fall back to "default"; this tool falls back to
// DefaultNamespace, where the gateway looks for per-peer accounts).
func contextNamespace(cc clientcmd.ClientConfig, override string) string {
	raw, err := cc.RawConfig()
	if err != nil {
		return ""
	}
	name := raw.CurrentContext
	if override != "" {
		name = override
	}
	if ctx := raw.Contexts[name]; ctx != nil {
		return ctx.Namespace
	}
	return ""
}

// apiError explains an API error: a Forbidden names the verb and resource
// the caller's RBAC lacks. namespace is empty for cluster-scoped resources.
func apiError(err error, verb, resource, namespace string) error {
	where := "cluster-wide"
	canI := fmt.Sprintf("kubectl auth can-i %s %s", verb, resource)
	if namespace != "" {
		where = "in namespace " + namespace
		canI += " -n " + namespace
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%w: your credentials may not %s %s %s: grant that in a Role/ClusterRole (check with: %s): %v",
			ErrForbidden, verb, resource, where, canI, apiMessage(err))
	}
	if apierrors.IsUnauthorized(err) {
		return fmt.Errorf("%s %s: the API server did not accept your credentials (check --kubeconfig/--context): %w", verb, resource, err)
	}
	return fmt.Errorf("%s %s %s: %w", verb, resource, where, err)
}

func apiMessage(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok {
		return s.Status().Message
	}
	return err.Error()
}
