package meshwatch

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/wirekube/relay-ws/extauthz/internal/events"
	"github.com/wirekube/relay-ws/extauthz/internal/kubewatch"
	"github.com/wirekube/relay-ws/internal/contract"
)

// Package meshwatch is the mesh watch (docs/extauthz.md#mesh-watch): WireKube's agent
// ClusterRole lets every node update the WireKubeMesh, and the agent sends
// its relay token to whatever URL spec.relay names. extauthz watches the
// WireKubeMeshes and reports each one that sends the agents elsewhere than
// this gateway or in clear (contract.MeshRelayTarget): gauges and a
// counter, a log line per change and a Warning Event on the mesh. It
// reports only: no check, no readiness depends on it, and nothing is
// refused (an admission policy is what refuses such writes).

// Bounds of the mesh watch's log lines: a node that rewrites the mesh in a
// loop writes one line per change, meshLogBurst of them, then one every
// meshLogEvery; every change is still counted (MetricMeshRelayChanges).
const (
	meshLogBurst = 10
	meshLogEvery = 30 // seconds
)

// Watch watches every WireKubeMesh and judges its relay settings
// against the expected URL (nil: none, wss:// is then wss_unverified).
// Safe for concurrent use.
type Watch struct {
	expected *url.URL
	inf      cache.SharedIndexInformer
	targets  *prometheus.GaugeVec
	changes  *prometheus.CounterVec
	synced   prometheus.Gauge
	events   *meshEvents // nil: no Events
	logs     flowcontrol.PassiveRateLimiter
	log      *slog.Logger

	mu         sync.Mutex
	seen       map[types.UID]meshRelay // the last judgement of each mesh
	suppressed bool                    // log lines are being dropped
	readErr    string                  // the last list/watch error, logged once per change
}

// New builds the watch over meshes (dyn.Resource(GVR)) and
// registers its metrics on reg. events nil records no Event; clk nil is
// the real clock.
func New(meshes dynamic.ResourceInterface, expected *url.URL, rec *events.Recorder, reg prometheus.Registerer,
	log *slog.Logger, clk clock.PassiveClock) (*Watch, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	w := &Watch{expected: expected, log: log, seen: map[types.UID]meshRelay{},
		logs: flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(1.0/meshLogEvery, meshLogBurst, clk),
		targets: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: contract.MetricMeshRelayTargets,
			Help: "WireKubeMeshes by where their relay settings send the agents (docs/extauthz.md#mesh-watch)."},
			[]string{"target"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: contract.MetricMeshRelayChanges,
			Help: "WireKubeMeshes seen pointing at a target: at first sight and at every change of target or endpoint."},
			[]string{"target"}),
		synced: prometheus.NewGauge(prometheus.GaugeOpts{Name: contract.MetricMeshRelayWatchSynced,
			Help: "1 once extauthz has listed the WireKubeMeshes, else 0."}),
	}
	for _, t := range contract.MeshRelayTargets {
		w.targets.WithLabelValues(string(t))
		w.changes.WithLabelValues(string(t))
	}
	for _, c := range []prometheus.Collector{w.targets, w.changes, w.synced} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("mesh watch metrics: %w", err)
		}
	}
	if rec != nil {
		w.events = newMeshEvents(rec)
	}
	if err := w.newInformer(meshes); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Watch) newInformer(meshes dynamic.ResourceInterface) error {
	w.inf = cache.NewSharedIndexInformerWithOptions(kubewatch.ListWatch(meshes, meshes.List, meshes.Watch),
		&unstructured.Unstructured{}, cache.SharedIndexInformerOptions{})
	if err := w.inf.SetTransform(slimMesh); err != nil {
		return fmt.Errorf("mesh informer: %w", err)
	}
	judge := func() {
		if w.inf.HasSynced() {
			w.judge()
		}
	}
	if _, err := w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { judge() }, UpdateFunc: func(any, any) { judge() }, DeleteFunc: func(any) { judge() },
	}); err != nil {
		return fmt.Errorf("mesh informer: %w", err)
	}
	if err := w.inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		w.readFailed(err)
	}); err != nil {
		return fmt.Errorf("mesh informer: %w", err)
	}
	return nil
}

// Run runs the informer (and the Event writer) until ctx is done and waits
// for them.
func (w *Watch) Run(ctx context.Context) {
	if w.expected == nil {
		w.log.Warn("--expected-relay-url not set: WireKubeMeshes are checked for ws:// only; a wss:// URL is reported "+
			"wss_unverified, whatever host it names", "target", string(contract.MeshRelayWSSUnverified))
	}
	var wg sync.WaitGroup
	wg.Go(func() { w.inf.RunWithContext(ctx) })
	if w.events != nil {
		wg.Go(func() { w.events.run(ctx) })
	}
	if cache.WaitForCacheSync(ctx.Done(), w.inf.HasSynced) {
		w.judge()
	}
	wg.Wait()
}

// Targets is the current count of WireKubeMeshes per target.
func (w *Watch) Targets() map[contract.MeshRelayTarget]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[contract.MeshRelayTarget]int{}
	for _, r := range w.seen {
		out[r.Target]++
	}
	return out
}

// judge re-reads every mesh from the informer's store, sets the gauges and
// reports each mesh whose judgement changed. Called once the informer has
// synced: the store holds every mesh.
func (w *Watch) judge() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.synced.Set(1)
	now := map[types.UID]meshRelay{}
	counts := map[contract.MeshRelayTarget]int{}
	for _, obj := range w.inf.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		r := judgeMesh(u, w.expected)
		now[u.GetUID()] = r
		counts[r.Target]++
		if before, ok := w.seen[u.GetUID()]; !ok || before.Target != r.Target || before.Hash != r.Hash {
			w.changed(u, before, r)
		}
	}
	w.seen = now
	for _, t := range contract.MeshRelayTargets {
		w.targets.WithLabelValues(string(t)).Set(float64(counts[t]))
	}
}

// changed counts, logs (within the bound) and records an Event for one
// mesh's new judgement; before is the zero meshRelay at first sight.
func (w *Watch) changed(u *unstructured.Unstructured, before, r meshRelay) {
	w.changes.WithLabelValues(string(r.Target)).Inc()
	if w.events != nil {
		w.events.record(u, before.Target, r)
	}
	if !w.logs.TryAccept() {
		if !w.suppressed {
			w.suppressed = true
			w.log.Warn("WireKubeMesh relay settings change faster than they are logged; further changes are counted in " +
				contract.MetricMeshRelayChanges)
		}
		return
	}
	w.suppressed = false
	level, msg := slog.LevelInfo, "WireKubeMesh relay settings"
	if r.Target.Exposes() {
		level, msg = slog.LevelWarn, "WireKubeMesh sends the agents' relay tokens elsewhere than this gateway or in clear"
	}
	w.log.Log(context.Background(), level, msg, "mesh", u.GetName(), "target", string(r.Target),
		"previous_target", string(before.Target), "provider", r.Provider, "transport", r.Transport, "source", r.Source,
		"host_match", r.HostMatch, "path_match", r.PathMatch, "endpoint_sha256", r.Hash,
		"expected_url_set", w.expected != nil)
}

// readFailed logs a list/watch error once per distinct message (RBAC
// without wirekubemeshes, or no WireKubeMesh CRD): the watch stays unsynced.
func (w *Watch) readFailed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if msg := err.Error(); msg != w.readErr {
		w.readErr = msg
		w.log.Warn("cannot read the WireKubeMeshes", "err", msg)
	}
}
