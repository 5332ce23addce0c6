// Package kubewatch holds what every informer of extauthz builds on: a
// ListerWatcher from a typed or dynamic client's List and Watch, and the
// marker that carries a clientset's "no WatchList" over to a narrow client.
package kubewatch

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// ListWatch adapts a typed client's List and Watch to a ListerWatcher. The
// reflector streams the initial list as a watch (WatchList) unless client
// says it cannot (client-go's fakes, wrapped by extauthz.NewClients), as the
// informer factories decide.
func ListWatch[L runtime.Object](client any, list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return list(ctx, o)
		},
		WatchFuncWithContext: watchFn,
	}, client)
}

// NoWatchList is a dynamic resource client that says its clientset does
// not support WatchList (a fake one, or a server that does not).
type NoWatchList struct{ dynamic.ResourceInterface }

// IsWatchListSemanticsUnSupported reports true.
func (NoWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// PeerGVR is the WireKubePeer resource (cluster-scoped).
var PeerGVR = schema.GroupVersionResource{Group: "wirekube.io", Version: "v1alpha1", Resource: "wirekubepeers"}

// Get is the object of key in inf's store as a T; false when inf is nil,
// the key is absent or the object is of another type.
func Get[T any](inf cache.SharedIndexInformer, key string) (T, bool) {
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
