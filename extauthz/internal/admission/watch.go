package admission

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	admissionv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/wirekube/relay-ws/extauthz/internal/kubewatch"
	"github.com/wirekube/relay-ws/internal/contract"
)

// Client is the part of the admissionregistration/v1 client the
// policy watch reads: the two cluster-scoped kinds, list and watch only
// (kubernetes.Interface.AdmissionregistrationV1() fits).
type Client interface {
	admissionv1client.ValidatingAdmissionPoliciesGetter
	admissionv1client.ValidatingAdmissionPolicyBindingsGetter
}

// Watch watches the WireKubePeer admission policy and its
// binding by name (field selector: only those two objects are listed) and
// reports whether they are in force: the gauges, and a log line at start
// and on every change. It never gates readiness nor a check: a missing
// policy, or RBAC that does not let extauthz read it, is reported
// (state unknown), never enforced. Safe for concurrent use.
type Watch struct {
	policyName, bindingName string
	policies, bindings      cache.SharedIndexInformer
	inForce                 prometheus.Gauge
	state                   *prometheus.GaugeVec
	log                     *slog.Logger

	mu      sync.Mutex
	current contract.PeerAdmissionState
	readErr string // the last list/watch error, logged once per change
}

// New builds the watch of the named objects (policy ""
// or a nil client: not watched, reported as such) and registers its
// gauges on reg.
func New(c Client, policy, binding string, reg prometheus.Registerer, log *slog.Logger) (*Watch, error) {
	w := &Watch{policyName: policy, bindingName: binding, log: log,
		inForce: prometheus.NewGauge(prometheus.GaugeOpts{Name: contract.MetricPeerAdmissionInForce,
			Help: "1 while the WireKubePeer admission policy is in force (docs/revocation.md#admission), else 0."}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: contract.MetricPeerAdmissionState,
			Help: "1 for the current state of the WireKubePeer admission policy, 0 for the others."}, []string{"state"}),
	}
	for _, s := range contract.PeerAdmissionStates {
		w.state.WithLabelValues(string(s))
	}
	for _, col := range []prometheus.Collector{w.inForce, w.state} {
		if err := reg.Register(col); err != nil {
			return nil, fmt.Errorf("peer admission metrics: %w", err)
		}
	}
	if policy == "" || c == nil {
		w.set(contract.PeerAdmissionNotWatched)
		return w, nil
	}
	var err error
	ps, bs := c.ValidatingAdmissionPolicies(), c.ValidatingAdmissionPolicyBindings()
	if w.policies, err = w.informer(named(c, ps.List, ps.Watch, policy), &admissionv1.ValidatingAdmissionPolicy{}); err != nil {
		return nil, err
	}
	if w.bindings, err = w.informer(named(c, bs.List, bs.Watch, binding), &admissionv1.ValidatingAdmissionPolicyBinding{}); err != nil {
		return nil, err
	}
	w.set(contract.PeerAdmissionUnknown)
	return w, nil
}

// named lists and watches only the object called name (WatchList as
// kubewatch.ListWatch decides for client).
func named[L runtime.Object](client any, list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), name string) cache.ListerWatcher {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return kubewatch.ListWatch(client, func(ctx context.Context, o metav1.ListOptions) (L, error) {
		o.FieldSelector = sel
		return list(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = sel
		return watchFn(ctx, o)
	})
}

// informer builds one informer whose every event re-judges the state and
// whose list/watch errors are logged (once per distinct error).
func (w *Watch) informer(lw cache.ListerWatcher, example runtime.Object) (cache.SharedIndexInformer, error) {
	inf := cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.judge() },
		UpdateFunc: func(any, any) { w.judge() },
		DeleteFunc: func(any) { w.judge() },
	}); err != nil {
		return nil, fmt.Errorf("peer admission informer: %w", err)
	}
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		w.readFailed(err)
	}); err != nil {
		return nil, fmt.Errorf("peer admission informer: %w", err)
	}
	return inf, nil
}

// Run runs the informers until ctx is done and waits for them. The state
// stays unknown until both have listed once.
func (w *Watch) Run(ctx context.Context) {
	if w.policies == nil {
		<-ctx.Done()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { w.policies.RunWithContext(ctx) })
	wg.Go(func() { w.bindings.RunWithContext(ctx) })
	if cache.WaitForCacheSync(ctx.Done(), w.policies.HasSynced, w.bindings.HasSynced) {
		w.judge()
	}
	wg.Wait()
}

// State is the current state.
func (w *Watch) State() contract.PeerAdmissionState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current
}

// judge recomputes the state from the informers' stores.
func (w *Watch) judge() {
	if !w.policies.HasSynced() || !w.bindings.HasSynced() {
		return
	}
	p, _ := kubewatch.Get[*admissionv1.ValidatingAdmissionPolicy](w.policies, w.policyName)
	b, _ := kubewatch.Get[*admissionv1.ValidatingAdmissionPolicyBinding](w.bindings, w.bindingName)
	w.set(judgePeerAdmission(w.policyName, p, b))
}

// set records s, updates the gauges and logs a change (the first state
// included): Info when in force, Warn otherwise.
func (w *Watch) set(s contract.PeerAdmissionState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s == w.current {
		return
	}
	w.current = s
	w.inForce.Set(0)
	if s == contract.PeerAdmissionInForce {
		w.inForce.Set(1)
	}
	for _, o := range contract.PeerAdmissionStates {
		v := 0.0
		if o == s {
			v = 1
		}
		w.state.WithLabelValues(string(o)).Set(v)
	}
	level, msg := slog.LevelWarn, "WireKubePeer admission policy not in force: "+notInForce(s)
	if s == contract.PeerAdmissionInForce {
		level, msg = slog.LevelInfo, "WireKubePeer admission policy in force: WireKubePeer keys, agent Pods and "+
			"the WireKubeMesh are node-restricted"
	}
	w.log.Log(context.Background(), level, msg, "state", string(s), "policy", w.policyName, "binding", w.bindingName)
}

// notInForce says what an agent may do in state s.
func notInForce(s contract.PeerAdmissionState) string {
	switch s {
	case contract.PeerAdmissionNoPodRule:
		return "any agent may rewrite any agent's Pod"
	case contract.PeerAdmissionNoMeshRule:
		return "any agent may rewrite the WireKubeMesh's relay settings"
	}
	return "any agent may move any WireKubePeer key, rewrite any agent's Pod and the WireKubeMesh's relay settings"
}

// readFailed logs a list/watch error once per distinct message: RBAC
// without the admissionregistration rules, or an API server without the
// API, keeps the state unknown.
func (w *Watch) readFailed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if msg := err.Error(); msg != w.readErr {
		w.readErr = msg
		w.log.Warn("cannot read the WireKubePeer admission policy", "policy", w.policyName, "binding", w.bindingName,
			"err", msg)
	}
}
