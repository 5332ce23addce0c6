package stack

import (
	"context"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// Namespace is where the agent ServiceAccount, its Pods and the per-peer
// ServiceAccounts live.
const Namespace = "wirekube-system"

var (
	// PeerGVR is the WireKubePeer resource (cluster-scoped).
	PeerGVR = schema.GroupVersionResource{Group: "wirekube.io", Version: "v1alpha1", Resource: "wirekubepeers"}
	crdGVR  = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// InstallCRD creates the CRD in the YAML document and waits until the API
// server reports it Established.
func (c *Cluster) InstallCRD(ctx context.Context, doc []byte) error {
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return fmt.Errorf("crd: %w", err)
	}
	u := &unstructured.Unstructured{Object: obj}
	approveProtectedGroup(u)
	if _, err := c.Dynamic.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("crd %s: %w", u.GetName(), err)
	}
	return WaitFor(ctx, nil, 30*time.Second, func(ctx context.Context) error {
		got, err := c.Dynamic.Resource(crdGVR).Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("crd %s not established yet", u.GetName())
	})
}

// approveProtectedGroup: the API server refuses a CRD in a *.k8s.io group
// without the api-approved.kubernetes.io annotation that the real upstream
// CRDs carry (Gateway API). A shape-only fixture may lack it; mark it as an
// unapproved test fixture, which the API server accepts.
func approveProtectedGroup(u *unstructured.Unstructured) {
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	if !strings.HasSuffix(group, ".k8s.io") && !strings.HasSuffix(group, ".kubernetes.io") {
		return
	}
	ann := u.GetAnnotations()
	if _, ok := ann["api-approved.kubernetes.io"]; ok {
		return
	}
	if ann == nil {
		ann = map[string]string{}
	}
	ann["api-approved.kubernetes.io"] = "unapproved, wirekube e2e test fixture"
	u.SetAnnotations(ann)
}

// EnsureNamespace creates a namespace and waits for its default
// ServiceAccount not to matter: Pods here name their ServiceAccount.
func (c *Cluster) EnsureNamespace(ctx context.Context, name string) error {
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	return nil
}

// CreateServiceAccount creates ns/name (or returns the existing one).
func (c *Cluster) CreateServiceAccount(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	sa, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		sa, err = c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("serviceaccount %s/%s: %w", ns, name, err)
	}
	return sa, nil
}

// DeleteServiceAccount deletes ns/name.
func (c *Cluster) DeleteServiceAccount(ctx context.Context, ns, name string) error {
	if err := c.Client.CoreV1().ServiceAccounts(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete serviceaccount %s/%s: %w", ns, name, err)
	}
	return nil
}

// CreateNode registers a Node object (there is no kubelet behind it).
func (c *Cluster) CreateNode(ctx context.Context, name string) (*corev1.Node, error) {
	n, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	return n, nil
}

// CreatePod creates a Pod already bound to node (no scheduler runs), running
// as serviceAccount.
func (c *Cluster) CreatePod(ctx context.Context, ns, name, serviceAccount, node string) (*corev1.Pod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "wirekube-agent"}},
		Spec: corev1.PodSpec{
			ServiceAccountName:           serviceAccount,
			NodeName:                     node,
			AutomountServiceAccountToken: new(false),
			Containers:                   []corev1.Container{{Name: "agent", Image: "wirekube/agent:e2e"}},
		},
	}
	p, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", ns, name, err)
	}
	return p, nil
}

// DeletePodNow force-deletes a Pod (grace period 0), as `kubectl delete
// --force` does: without a kubelet a graceful delete would never finish.
func (c *Cluster) DeletePodNow(ctx context.Context, ns, name string) error {
	err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	if err != nil {
		return fmt.Errorf("delete pod %s/%s: %w", ns, name, err)
	}
	return WaitFor(ctx, nil, 10*time.Second, func(ctx context.Context) error {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod %s/%s still there (%v)", ns, name, err)
	})
}

// CreatePeer creates a WireKubePeer with spec.publicKey set verbatim (the
// tests also store malformed keys).
func (c *Cluster) CreatePeer(ctx context.Context, name, publicKey string) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "wirekube.io/v1alpha1",
		"kind":       "WireKubePeer",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"publicKey": publicKey, "allowedIPs": []any{"10.200.0.1/32"}, "persistentKeepalive": int64(25)},
	}}
	if _, err := c.Dynamic.Resource(PeerGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("wirekubepeer %s: %w", name, err)
	}
	return nil
}

// TokenOptions describe a TokenRequest.
type TokenOptions struct {
	Audience string
	Duration time.Duration // at least 10 minutes (the API refuses less)
	// BoundKind is "", "Pod", "Node" or "Secret"; BoundName/BoundUID name it.
	BoundKind, BoundName, BoundUID string
}

// Token issues a real token for ns/serviceAccount through the TokenRequest API.
func (c *Cluster) Token(ctx context.Context, ns, serviceAccount string, o TokenOptions) (string, error) {
	secs := int64(o.Duration / time.Second)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{o.Audience}, ExpirationSeconds: &secs,
	}}
	if o.BoundKind != "" {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{
			Kind: o.BoundKind, APIVersion: "v1", Name: o.BoundName, UID: types.UID(o.BoundUID),
		}
	}
	tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, serviceAccount, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("tokenrequest %s/%s: %w", ns, serviceAccount, err)
	}
	return tr.Status.Token, nil
}
