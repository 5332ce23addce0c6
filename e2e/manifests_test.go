//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wirekube/relay-ws/internal/test/render"
	"github.com/wirekube/relay-ws/internal/test/stack"
)

// testManifests: every rendered kustomize directory (the base and each
// example) passes a server-side dry-run apply against the real API server,
// with the CRD fixtures installed for the kinds they use.
func (e *env) testManifests(t *testing.T) {
	ctx := context.Background()
	for _, dir := range render.Dirs() {
		t.Run(dir, func(t *testing.T) {
			objs, err := stack.RenderKustomize(ctx, filepath.Join(e.repo, "manifests", dir))
			fatalIf(t, err)
			if len(objs) == 0 {
				t.Fatalf("%s renders no objects", dir)
			}
			for _, o := range objs {
				if ns := o.GetNamespace(); ns != "" {
					fatalIf(t, e.cluster.EnsureNamespace(ctx, ns))
				}
			}
			fatalIf(t, e.cluster.Apply(ctx, objs, true))
		})
	}
}

// testExtauthzRBAC: extauthz runs as the manifests' ServiceAccount, whose
// RBAC must not reach Secrets.
func (e *env) testExtauthzRBAC(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", e.extauthzKubeconfigPath)
	fatalIf(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	fatalIf(t, err)
	ctx := context.Background()
	for _, ns := range []string{stack.Namespace, "default"} {
		_, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s listing Secrets in %s: %v, want Forbidden", e.extauthzSA, ns, err)
		}
	}
	if _, err := cs.CoreV1().Pods(stack.Namespace).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		t.Errorf("%s listing Pods in %s: %v, want allowed", e.extauthzSA, stack.Namespace, err)
	}
	checkDiscoveryRBAC(t, cs)
}
