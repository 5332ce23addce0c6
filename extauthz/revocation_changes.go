package extauthz

import (
	"fmt"
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/wirekube/relay-ws/internal/revocation"
)

// OnChange calls f with the revocation index key (revocationhub.ObjectKey) of every Pod,
// ServiceAccount, Node and WireKubePeer the informers add, update or
// delete. An informer updates its cache before it calls handlers, so a
// lookup from f (or after it) sees the change. f must not block: it runs
// on the informers' delivery goroutines.
func (in *Informers) OnChange(f func(key string)) error {
	type kindInformer struct {
		kind string
		inf  cache.SharedIndexInformer
	}
	infs := []kindInformer{{revocationhub.KindNode, in.nodes}, {revocationhub.KindPeer, in.peers}}
	for _, inf := range in.pods {
		infs = append(infs, kindInformer{revocationhub.KindPod, inf})
	}
	for _, inf := range in.sas {
		infs = append(infs, kindInformer{revocationhub.KindSA, inf})
	}
	for _, i := range infs {
		if _, err := i.inf.AddEventHandler(changeHandler(i.kind, f)); err != nil {
			return fmt.Errorf("informers: %s event handler: %w", i.kind, err)
		}
	}
	if _, err := in.peers.AddEventHandler(peerKeyHandler(f)); err != nil {
		return fmt.Errorf("informers: peer key event handler: %w", err)
	}
	return nil
}

// peerKeyHandler marks the keys a WireKubePeer held before and holds after
// a change: bindings of other peers with that key are re-judged (a key that
// became, or stopped being, held twice).
func peerKeyHandler(f func(string)) cache.ResourceEventHandler {
	notify := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			if k, ok := peerKeyOf(u); ok {
				f(revocationhub.KeyHashKey(revocation.KeyHash(k[:])))
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(old, obj any) { notify(old); notify(obj) },
		DeleteFunc: notify,
	}
}

func changeHandler(kind string, f func(string)) cache.ResourceEventHandler {
	notify := func(obj any) {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		ns, name, ok := strings.Cut(key, "/")
		if !ok {
			ns, name = "", key
		}
		f(revocationhub.ObjectKey(kind, ns, name))
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	}
}
