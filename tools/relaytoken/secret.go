package relaytoken

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// writeSecret stores the token in a managed Secret usable as authSecretRef
// (key SecretTokenKey). It refuses to overwrite a Secret it does not manage
// or that belongs to another peer.
func (t *Tool) writeSecret(ctx context.Context, o IssueOptions, tok string, expires time.Time) error {
	secrets := t.Clients.Core.Secrets(o.Namespace)
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: o.Secret, Namespace: o.Namespace, Labels: managedLabels(o.Peer),
			Annotations: map[string]string{
				AnnotationPeer:           o.Peer,
				AnnotationServiceAccount: ServiceAccountName(o.Peer),
				AnnotationExpires:        expires.UTC().Format(time.RFC3339),
			}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{SecretTokenKey: []byte(tok)},
	}
	cur, err := secrets.Get(ctx, o.Secret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := secrets.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return apiError(err, "create", "secrets", o.Namespace)
		}
		return nil
	}
	if err != nil {
		return apiError(err, "get", "secrets", o.Namespace)
	}
	if !isManaged(cur.Labels) || cur.Annotations[AnnotationPeer] != o.Peer {
		return fmt.Errorf("%w: Secret %s/%s exists and is not this tool's Secret for peer %q: choose another --secret",
			ErrNotManaged, o.Namespace, o.Secret, o.Peer)
	}
	want.ResourceVersion = cur.ResourceVersion
	if _, err := secrets.Update(ctx, want, metav1.UpdateOptions{}); err != nil {
		return apiError(err, "update", "secrets", o.Namespace)
	}
	return nil
}

// WriteTokenFile writes tok (plus a newline) to path with mode 0600. It
// writes a temporary file in the same directory, created 0600 from the
// start, and renames it over path, so the token is never readable by
// others, not even briefly, and a reader never sees half a token.
func WriteTokenFile(path, tok string) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".wirekube-relay-token-*") // mode 0600
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	if _, err = f.WriteString(tok + "\n"); err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	return nil
}
