package extauthz

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/wirekube/relay-ws/extauthz/internal/keyhistory"
	"github.com/wirekube/relay-ws/extauthz/internal/kubewatch"
	"github.com/wirekube/relay-ws/relayproto"
)

// PeerGVR is the WireKubePeer resource (cluster-scoped).
var PeerGVR = kubewatch.PeerGVR

// PeerKind is the WireKubePeer kind.
const PeerKind = "WireKubePeer"

// CoreClient is the part of the core/v1 client the informers read: Pods,
// ServiceAccounts and Nodes, list and watch only.
type CoreClient interface {
	corev1client.PodsGetter
	corev1client.ServiceAccountsGetter
	corev1client.NodesGetter
}

// Informers is the informer-backed Objects. It watches Pods and
// ServiceAccounts only in the namespaces the config names (agent, peer and
// allowlisted ServiceAccount namespaces), Nodes (name and UID, for node-bound
// tokens) and WireKubePeers; every object is stripped to the fields the
// identity rules read. Lookups are safe for concurrent use.
type Informers struct {
	all    []cache.SharedIndexInformer
	pods   map[string]cache.SharedIndexInformer
	sas    map[string]cache.SharedIndexInformer
	nodes  cache.SharedIndexInformer
	peers  cache.SharedIndexInformer
	synced []cache.InformerSynced
	// history remembers each key's owner (internal/keyhistory).
	history *keyhistory.History
	wg      sync.WaitGroup
}

// NewInformers builds (but does not start) the informers for cfg over the
// narrow clients: core for Pods, ServiceAccounts and Nodes, peers for the
// cluster-scoped WireKubePeer resource (dyn.Resource(PeerGVR)).
func NewInformers(cfg *Config, core CoreClient, peers dynamic.ResourceInterface) (*Informers, error) {
	in := &Informers{pods: map[string]cache.SharedIndexInformer{}, sas: map[string]cache.SharedIndexInformer{}}
	var err error
	for _, ns := range cfg.watchedNamespaces {
		pods, sas := core.Pods(ns), core.ServiceAccounts(ns)
		if in.pods[ns], err = in.add(kubewatch.ListWatch(core, pods.List, pods.Watch), &corev1.Pod{}); err != nil {
			return nil, err
		}
		if in.sas[ns], err = in.add(kubewatch.ListWatch(core, sas.List, sas.Watch), &corev1.ServiceAccount{}); err != nil {
			return nil, err
		}
	}
	nodes := core.Nodes()
	if in.nodes, err = in.add(kubewatch.ListWatch(core, nodes.List, nodes.Watch), &corev1.Node{}); err != nil {
		return nil, err
	}
	if in.peers, err = in.add(kubewatch.ListWatch(peers, peers.List, peers.Watch), &unstructured.Unstructured{}); err != nil {
		return nil, err
	}
	if err := in.peers.AddIndexers(cache.Indexers{peerKeyIndex: peerKeyIndexFunc}); err != nil {
		return nil, fmt.Errorf("WireKubePeer key index: %w", err)
	}
	in.history = keyhistory.New()
	if _, err := in.peers.AddEventHandler(in.history.PeerHandler(peerKeyOf)); err != nil {
		return nil, fmt.Errorf("WireKubePeer key history: %w", err)
	}
	if _, err := in.nodes.AddEventHandler(in.history.NodeHandler()); err != nil {
		return nil, fmt.Errorf("Node key history: %w", err)
	}
	return in, nil
}

// add builds one informer with the slimming transform and records it.
func (in *Informers) add(lw cache.ListerWatcher, example runtime.Object) (cache.SharedIndexInformer, error) {
	inf := cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{
		Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	})
	if err := inf.SetTransform(slimObject); err != nil {
		return nil, fmt.Errorf("%T informer: %w", example, err)
	}
	in.all = append(in.all, inf)
	in.synced = append(in.synced, inf.HasSynced)
	return inf, nil
}

// coreNoWatchList carries a clientset's "no WatchList" marker over to the
// narrow client derived from it (kubewatch.NoWatchList for the dynamic ones).
type coreNoWatchList struct{ CoreClient }

func (coreNoWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// Start starts every informer; they stop when ctx is done. Shutdown waits
// for their goroutines.
func (in *Informers) Start(ctx context.Context) {
	for _, inf := range in.all {
		in.wg.Go(func() { inf.RunWithContext(ctx) })
	}
}

// Shutdown waits for the informer goroutines; call it after ctx of Start is
// done.
func (in *Informers) Shutdown() {
	in.wg.Wait()
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

// Pod implements Objects.
func (in *Informers) Pod(namespace, name string) (*corev1.Pod, bool) {
	return kubewatch.Get[*corev1.Pod](in.pods[namespace], namespace+"/"+name)
}

// ServiceAccount implements Objects.
func (in *Informers) ServiceAccount(namespace, name string) (*corev1.ServiceAccount, bool) {
	return kubewatch.Get[*corev1.ServiceAccount](in.sas[namespace], namespace+"/"+name)
}

// Node implements Objects.
func (in *Informers) Node(name string) (*corev1.Node, bool) {
	return kubewatch.Get[*corev1.Node](in.nodes, name)
}

// PeerKey implements Objects.
func (in *Informers) PeerKey(name string) (string, bool) {
	u, ok := kubewatch.Get[*unstructured.Unstructured](in.peers, name)
	if !ok {
		return "", false
	}
	key, found, err := unstructured.NestedString(u.Object, "spec", "publicKey")
	if err != nil || !found {
		return "", true
	}
	return key, true
}

// peerKeyIndex indexes WireKubePeers by their key in canonical std base64
// (a peer whose spec.publicKey is no key is not indexed).
const peerKeyIndex = "publicKey"

func peerKeyIndexFunc(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	k, ok := peerKeyOf(u)
	if !ok {
		return nil, nil
	}
	return []string{k.Base64()}, nil
}

// peerKeyOf is the parsed spec.publicKey of a WireKubePeer.
func peerKeyOf(u *unstructured.Unstructured) (relayproto.Key, bool) {
	raw, found, err := unstructured.NestedString(u.Object, "spec", "publicKey")
	if err != nil || !found {
		return relayproto.Key{}, false
	}
	k, err := relayproto.ParseKey(raw)
	return k, err == nil
}

// PeersWithKey implements Objects.
func (in *Informers) PeersWithKey(key string) []string {
	objs, err := in.peers.GetIndexer().ByIndex(peerKeyIndex, key)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			names = append(names, u.GetName())
		}
	}
	return names
}

// DuplicatePeerKeys counts the keys held by more than one WireKubePeer
// (the wirekube_extauthz_peer_keys_duplicate gauge).
func (in *Informers) DuplicatePeerKeys() int {
	idx := in.peers.GetIndexer()
	n := 0
	for _, k := range idx.ListIndexFuncValues(peerKeyIndex) {
		if objs, err := idx.ByIndex(peerKeyIndex, k); err == nil && len(objs) > 1 {
			n++
		}
	}
	return n
}

// slimObject is the informer transform: it keeps only the fields the
// identity rules read, so the caches stay small. Unknown types (such as
// cache.DeletedFinalStateUnknown) pass through unchanged.
func slimObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return &corev1.Pod{ObjectMeta: slimMeta(&o.ObjectMeta), Spec: corev1.PodSpec{
			ServiceAccountName: o.Spec.ServiceAccountName, NodeName: o.Spec.NodeName},
			Status: corev1.PodStatus{Phase: o.Status.Phase}}, nil
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
		out.SetOwnerReferences(nodeOwners(o.GetOwnerReferences()))
		if key, found, err := unstructured.NestedString(o.Object, "spec", "publicKey"); err == nil && found {
			_ = unstructured.SetNestedField(out.Object, key, "spec", "publicKey")
		}
		return out, nil
	}
	return obj, nil
}

// nodeOwners keeps the Node owner references of a WireKubePeer (the key
// history's evidence, keyowner.go), stripped to their identifying fields.
func nodeOwners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, r := range refs {
		if r.APIVersion == "v1" && r.Kind == "Node" {
			out = append(out, metav1.OwnerReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID})
		}
	}
	return out
}

func slimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
}

// PeerRef is the Event reference of the WireKubePeer named name: what
// kubectl describe searches by (apiVersion, kind, name, uid; no namespace).
func (in *Informers) PeerRef(name string) (corev1.ObjectReference, bool) {
	u, ok := kubewatch.Get[*unstructured.Unstructured](in.peers, name)
	if !ok || u.GetUID() == "" {
		return corev1.ObjectReference{}, false
	}
	return corev1.ObjectReference{APIVersion: PeerGVR.GroupVersion().String(), Kind: PeerKind,
		Name: u.GetName(), UID: u.GetUID()}, true
}

// NodeRef is the Event reference of the Node named name.
func (in *Informers) NodeRef(name string) (corev1.ObjectReference, bool) {
	n, ok := in.Node(name)
	if !ok || n.UID == "" {
		return corev1.ObjectReference{}, false
	}
	return corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}, true
}
