package relaytoken

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Revoked lists what Revoke deleted.
type Revoked struct {
	Namespace      string
	ServiceAccount string // empty when there was none
	Secrets        []string
}

// Revoke deletes the peer's ServiceAccount and every managed Secret of the
// peer in namespace. TokenReview then rejects the tokens of that
// ServiceAccount, so the gateway refuses them at the next upgrade. Sessions
// already upgraded are not touched: the gateway checks tokens only at the
// upgrade. It fails with ErrNothingToDrop when nothing was found.
func (t *Tool) Revoke(ctx context.Context, namespace, peer string) (Revoked, error) {
	if err := ValidatePeer(peer); err != nil {
		return Revoked{}, err
	}
	if namespace == "" {
		namespace = DefaultNamespace
	}
	res := Revoked{Namespace: namespace}
	sas := t.Clients.Core.ServiceAccounts(namespace)
	name := ServiceAccountName(peer)
	sa, err := sas.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return res, apiError(err, "get", "serviceaccounts", namespace)
	case !isManaged(sa.Labels):
		return res, fmt.Errorf("%w: ServiceAccount %s/%s has no %s=%s label; delete it with kubectl if that is what you want",
			ErrNotManaged, namespace, name, LabelManagedBy, ManagedByValue)
	default:
		if err := sas.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return res, apiError(err, "delete", "serviceaccounts", namespace)
		}
		res.ServiceAccount = name
	}
	if err := t.deleteSecrets(ctx, namespace, peer, &res); err != nil {
		return res, err
	}
	if res.ServiceAccount == "" && len(res.Secrets) == 0 {
		return res, fmt.Errorf("%w: no managed ServiceAccount or Secret for peer %q in namespace %s", ErrNothingToDrop, peer, namespace)
	}
	return res, nil
}

func (t *Tool) deleteSecrets(ctx context.Context, namespace, peer string, res *Revoked) error {
	secrets := t.Clients.Core.Secrets(namespace)
	l, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: managedSelector})
	if err != nil {
		return apiError(err, "list", "secrets", namespace)
	}
	for _, s := range l.Items {
		if s.Annotations[AnnotationPeer] != peer {
			continue
		}
		if err := secrets.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return apiError(err, "delete", "secrets", namespace)
		}
		res.Secrets = append(res.Secrets, s.Name)
	}
	return nil
}

// revokeNotice is printed after a revoke: what changes now and what not.
const revokeNotice = `Sessions already connected with this peer's tokens are closed within seconds (WebSocket 1008
service_account_not_found: extauthz sees the ServiceAccount go and the bridges follow its
revocation stream; a bridge run with an empty --revocation-addr does not). New connections are
refused from the gateway's next token check: TokenReview rejects tokens of a deleted
ServiceAccount (kube-apiserver and the gateway may keep a positive review cached for a few
seconds). Token files written with --token-file are not deleted, but the tokens in them no
longer work.`
