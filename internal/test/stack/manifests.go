package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/wirekube/relay-ws/internal/test/render"
)

// RenderKustomize renders a kustomization directory with the project's
// pinned renderer (render.Kustomize: $KUSTOMIZE, the cached pinned
// kustomize, kubectl kustomize, or a go install of the pinned kustomize) and
// returns its objects.
func RenderKustomize(ctx context.Context, dir string) ([]*unstructured.Unstructured, error) {
	out, err := render.Kustomize(ctx, dir)
	if err != nil {
		return nil, err
	}
	return DecodeObjects(out)
}

// DecodeObjects splits a multi-document YAML stream into objects.
func DecodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decode manifests: %w", err)
		}
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

// Apply creates each object with server-side apply; with dryRun the API
// server runs admission, validation and defaulting but stores nothing.
func (c *Cluster) Apply(ctx context.Context, objs []*unstructured.Unstructured, dryRun bool) error {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	opts := metav1.ApplyOptions{FieldManager: "wirekube-e2e", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, o.GetName(), err)
		}
		ri := c.Dynamic.Resource(m.Resource)
		var applyErr error
		if m.Scope.Name() == "namespace" {
			ns := o.GetNamespace()
			if ns == "" {
				ns = "default" // as kubectl apply without -n
				o = o.DeepCopy()
				o.SetNamespace(ns)
			}
			_, applyErr = ri.Namespace(ns).Apply(ctx, o.GetName(), o, opts)
		} else {
			_, applyErr = ri.Apply(ctx, o.GetName(), o, opts)
		}
		if applyErr != nil {
			return fmt.Errorf("apply %s %s/%s (dry run %v): %w", gvk.Kind, o.GetNamespace(), o.GetName(), dryRun, applyErr)
		}
	}
	return nil
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as
// ns/name with a real token (audience: the API server) valid for ttl.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, ns, name string, ttl time.Duration) (path, token string, err error) {
	token, err = c.Token(ctx, ns, name, TokenOptions{Audience: Issuer, Duration: ttl})
	if err != nil {
		return "", "", err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: c.URL, CertificateAuthorityData: c.CA.CertPEM}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: name, Namespace: ns}
	kc.CurrentContext = "e2e"
	path = filepath.Join(c.Dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", "", fmt.Errorf("kubeconfig %s: %w", name, err)
	}
	return path, token, nil
}

// ExtauthzKubeconfig applies the ServiceAccount and RBAC of the rendered
// manifests/base under repo for real and returns a kubeconfig for that
// ServiceAccount (valid 24 h), its name and its token: extauthz then runs
// with exactly the permissions the manifests grant.
func (c *Cluster) ExtauthzKubeconfig(ctx context.Context, repo string) (path, sa, token string, err error) {
	objs, err := RenderKustomize(ctx, filepath.Join(repo, "manifests", "base"))
	if err != nil {
		return "", "", "", err
	}
	var rbac []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount":
			sa = o.GetName()
			rbac = append(rbac, o)
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			rbac = append(rbac, o)
		}
	}
	if sa == "" || len(rbac) < 5 {
		return "", "", "", fmt.Errorf("manifests/base renders %d RBAC objects and ServiceAccount %q", len(rbac), sa)
	}
	if err := c.Apply(ctx, rbac, false); err != nil {
		return "", "", "", err
	}
	path, token, err = c.ServiceAccountKubeconfig(ctx, Namespace, sa, 24*time.Hour)
	return path, sa, token, err
}
