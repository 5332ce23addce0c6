package extauthz

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// PeerGVR is the WireKubePeer resource (cluster-scoped).
var PeerGVR = schema.GroupVersionResource{Group: "wirekube.io", Version: "v1alpha1", Resource: "wirekubepeers"}

// Informers is the informer-backed Objects. It watches Pods and
// ServiceAccounts only in the namespaces the options name (agent, peer and
// allowlisted ServiceAccount namespaces), Nodes (name and UID, for node-bound
// tokens) and WireKubePeers; every object is stripped to the fields the
// identity rules read. Lookups are safe for concurrent use.
type Informers struct {
	factories []informers.SharedInformerFactory
	dynamic   dynamicinformer.DynamicSharedInformerFactory
	pods      map[string]cache.SharedIndexInformer
	sas       map[string]cache.SharedIndexInformer
	nodes     cache.SharedIndexInformer
	peers     cache.SharedIndexInformer
	synced    []cache.InformerSynced
}

// NewInformers builds (but does not start) the informers for opts.
func NewInformers(opts Options, client kubernetes.Interface, dyn dynamic.Interface) (*Informers, error) {
	cfg, err := opts.complete()
	if err != nil {
		return nil, err
	}
	in := &Informers{pods: map[string]cache.SharedIndexInformer{}, sas: map[string]cache.SharedIndexInformer{}}
	for _, ns := range cfg.watchedNamespaces {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0,
			informers.WithNamespace(ns), informers.WithTransform(slimObject))
		in.pods[ns] = f.Core().V1().Pods().Informer()
		in.sas[ns] = f.Core().V1().ServiceAccounts().Informer()
		in.synced = append(in.synced, in.pods[ns].HasSynced, in.sas[ns].HasSynced)
		in.factories = append(in.factories, f)
	}
	cf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(slimObject))
	in.nodes = cf.Core().V1().Nodes().Informer()
	in.factories = append(in.factories, cf)
	in.dynamic = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	in.peers = in.dynamic.ForResource(PeerGVR).Informer()
	if err := in.peers.SetTransform(slimObject); err != nil {
		return nil, fmt.Errorf("wirekubepeer informer: %w", err)
	}
	in.synced = append(in.synced, in.nodes.HasSynced, in.peers.HasSynced)
	return in, nil
}

// Start starts every informer; they stop when ctx is done. Shutdown waits
// for their goroutines.
func (in *Informers) Start(ctx context.Context) {
	for _, f := range in.factories {
		f.Start(ctx.Done())
	}
	in.dynamic.Start(ctx.Done())
}

// Shutdown waits for the informer goroutines; call it after ctx of Start is
// done.
func (in *Informers) Shutdown() {
	for _, f := range in.factories {
		f.Shutdown()
	}
	in.dynamic.Shutdown()
}

// HasSynced reports whether every cache holds a full list.
func (in *Informers) HasSynced() bool {
	for _, s := range in.synced {
		if !s() {
			return false
		}
	}
	return true
}

// WaitForSync blocks until HasSynced or ctx is done.
func (in *Informers) WaitForSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), in.synced...) {
		return errors.New("informers: caches did not sync")
	}
	return nil
}

func getTyped[T any](inf cache.SharedIndexInformer, key string) (T, bool) {
	var zero T
	if inf == nil {
		return zero, false
	}
	obj, ok, err := inf.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		return zero, false
	}
	t, ok := obj.(T)
	return t, ok
}

// Pod implements Objects.
func (in *Informers) Pod(namespace, name string) (*corev1.Pod, bool) {
	return getTyped[*corev1.Pod](in.pods[namespace], namespace+"/"+name)
}

// ServiceAccount implements Objects.
func (in *Informers) ServiceAccount(namespace, name string) (*corev1.ServiceAccount, bool) {
	return getTyped[*corev1.ServiceAccount](in.sas[namespace], namespace+"/"+name)
}

// Node implements Objects.
func (in *Informers) Node(name string) (*corev1.Node, bool) {
	return getTyped[*corev1.Node](in.nodes, name)
}

// PeerKey implements Objects.
func (in *Informers) PeerKey(name string) (string, bool) {
	u, ok := getTyped[*unstructured.Unstructured](in.peers, name)
	if !ok {
		return "", false
	}
	key, found, err := unstructured.NestedString(u.Object, "spec", "publicKey")
	if err != nil || !found {
		return "", true
	}
	return key, true
}

// slimObject is the informer transform: it keeps only the fields the
// identity rules read, so the caches stay small. Unknown types (such as
// cache.DeletedFinalStateUnknown) pass through unchanged.
func slimObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return &corev1.Pod{ObjectMeta: slimMeta(&o.ObjectMeta), Spec: corev1.PodSpec{
			ServiceAccountName: o.Spec.ServiceAccountName, NodeName: o.Spec.NodeName}}, nil
	case *corev1.ServiceAccount:
		return &corev1.ServiceAccount{ObjectMeta: slimMeta(&o.ObjectMeta)}, nil
	case *corev1.Node:
		return &corev1.Node{ObjectMeta: slimMeta(&o.ObjectMeta)}, nil
	case *unstructured.Unstructured:
		out := &unstructured.Unstructured{Object: map[string]any{}}
		out.SetAPIVersion(o.GetAPIVersion())
		out.SetKind(o.GetKind())
		out.SetName(o.GetName())
		out.SetUID(o.GetUID())
		out.SetResourceVersion(o.GetResourceVersion())
		if key, found, err := unstructured.NestedString(o.Object, "spec", "publicKey"); err == nil && found {
			_ = unstructured.SetNestedField(out.Object, key, "spec", "publicKey")
		}
		return out, nil
	}
	return obj, nil
}

func slimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
}
