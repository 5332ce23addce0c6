package events

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/wirekube/relay-ws/internal/contract"
)

// Where and how Events are written.
const (
	// eventsNamespace: kube-apiserver accepts an Event about a
	// cluster-scoped object (involvedObject.namespace empty) only in
	// "default" (core/v1 Events without eventTime; kube-system too with
	// eventTime, events.k8s.io). kubectl describe lists such an object's
	// Events in every namespace, so "default" is found.
	eventsNamespace = metav1.NamespaceDefault
	// eventsComponent is the Events' source.component.
	eventsComponent = "wirekube-extauthz"
	// eventsWriteTimeout bounds one create or patch.
	eventsWriteTimeout = 5 * time.Second
)

// Client writes Events (kubernetes.Interface.CoreV1() fits).
type Client = corev1client.EventsGetter

// Objects resolves the objects Events are about: a WireKubePeer, or a
// Node (for a peer that does not exist). extauthz's Informers implements it.
type Objects interface {
	PeerRef(name string) (corev1.ObjectReference, bool)
	NodeRef(name string) (corev1.ObjectReference, bool)
}

// Recorder records Events on WireKubePeers. Revoked and Refused never
// block and never fail; Run writes what they queued. Revocations and
// refusals go through two lanes, each with its own queue, spam filter and
// writer (lanes.go): no number of refusals, which a client can
// provoke, delays, drops or rate-limits the Event of a revocation, which only
// an object change causes. Safe for concurrent use.
type Recorder struct {
	client      Client
	objects     Objects
	clock       clock.PassiveClock
	source      corev1.EventSource
	results     *prometheus.CounterVec
	log         *slog.Logger
	revocations *Lane
	refusals    *Lane
	failing     atomic.Bool // a failure was logged and no write of either lane succeeded since
}

// New builds the recorder; host is source.host (the Pod name), clk nil
// means the real clock.
func New(client Client, objects Objects, reg prometheus.Registerer, log *slog.Logger,
	host string, clk clock.PassiveClock) (*Recorder, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	e := &Recorder{client: client, objects: objects, clock: clk,
		source: corev1.EventSource{Component: eventsComponent, Host: host}, log: log,
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: contract.MetricsNamespaceExtauthz, Name: "peer_events_total",
			Help: "Kubernetes Events on WireKubePeers and WireKubeMeshes by lane (revocation|refusal|mesh) and result " +
				"(created|updated|rate_limited|dropped|share_full|failed).",
		}, []string{"lane", "result"}),
	}
	// Only an object change causes a revocation: that lane needs no share.
	e.revocations, e.refusals = e.NewLane(laneRevocation, 0), e.NewLane(laneRefusal, QueueShare)
	if err := reg.Register(e.results); err != nil {
		return nil, fmt.Errorf("events metrics: %w", err)
	}
	return e, nil
}

// NewLane adds a lane of its own to wirekube_extauthz_peer_events_total:
// its queue, spam filter and share (0: none). Its Events are written by
// RunLane, not by Run.
func (e *Recorder) NewLane(name string, share int) *Lane {
	for _, r := range []string{eventCreated, eventUpdated, eventRateLimited, eventDropped, eventShareFull, eventFailed} {
		e.results.WithLabelValues(name, r)
	}
	return &Lane{name: name, queue: make(chan *corev1.Event, eventsQueue), share: share,
		queued: map[string]int{},
		corr: record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{
			BurstSize: eventsBurst, QPS: float32(1 / eventsRefill.Seconds()), Clock: e.clock,
			SpamKeyFunc: eventSpamKey,
		})}
}

// record queues an Event about peer's WireKubePeer on lane l, or about the
// Node of that name when the peer does not exist; without either nothing is
// recorded (there is nothing for kubectl describe to show it on).
func (e *Recorder) record(l *Lane, peer string, r contract.Reason, typ, msg string) {
	ref, ok := e.objects.PeerRef(peer)
	if !ok {
		if ref, ok = e.objects.NodeRef(peer); !ok {
			return
		}
	}
	e.Enqueue(l, ref, string(r), typ, msg)
}

// Enqueue queues an Event about ref on lane l (dropped and counted when
// the lane's queue is full); it never blocks.
func (e *Recorder) Enqueue(l *Lane, ref corev1.ObjectReference, reason, typ, msg string) {
	now := metav1.NewTime(e.clock.Now())
	ev := &corev1.Event{
		// The lane and its sequence number in the name: Events about one
		// object recorded at the same instant (of both lanes, or of two
		// reasons, each with its own budget) must not collide.
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%s.%x.%x", ref.Name, l.name, now.UnixNano(), l.seq.Add(1)),
			Namespace: eventsNamespace},
		InvolvedObject: ref, Reason: reason, Message: msg, Type: typ,
		FirstTimestamp: now, LastTimestamp: now, Count: 1, Source: e.source,
		ReportingController: e.source.Component, ReportingInstance: e.source.Host,
	}
	if result := l.enqueue(ev); result != "" {
		e.results.WithLabelValues(l.name, result).Inc()
	}
}

// Run writes the queued Events of both lanes, one writer each, until ctx
// is done; it returns when both writers have.
func (e *Recorder) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, l := range []*Lane{e.revocations, e.refusals} {
		wg.Go(func() { e.RunLane(ctx, l) })
	}
	wg.Wait()
}

// RunLane writes the queued Events of l until ctx is done.
func (e *Recorder) RunLane(ctx context.Context, l *Lane) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-l.queue:
			e.write(ctx, l, ev)
		}
	}
}

// write passes ev through the lane's correlator and writes what it says: a
// new Event, a count patch of the one already written, or nothing.
func (e *Recorder) write(ctx context.Context, l *Lane, ev *corev1.Event) {
	l.dequeued(ev)
	res, err := l.corr.EventCorrelate(ev)
	if err == nil && res.Skip {
		e.results.WithLabelValues(l.name, eventRateLimited).Inc()
		return
	}
	var out *corev1.Event
	result := eventFailed
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, eventsWriteTimeout)
		out, result, err = e.send(ctx, res)
		cancel()
	}
	e.results.WithLabelValues(l.name, result).Inc()
	if err != nil {
		if e.failing.CompareAndSwap(false, true) {
			e.log.Warn("cannot write Kubernetes Events (RBAC create and patch on events in namespace default?); "+
				"further failures are only counted in wirekube_extauthz_peer_events_total{result=\"failed\"}",
				slog.String("lane", l.name), slog.String("reason", string(apierrors.ReasonForError(err))),
				slog.String("error", err.Error()))
		}
		return
	}
	if e.failing.CompareAndSwap(true, false) {
		e.log.Info("writing Kubernetes Events again", slog.String("lane", l.name))
	}
	l.corr.UpdateState(out)
}

// send creates the Event, or patches the count of the one the correlator
// already knows (creating it if it is gone).
func (e *Recorder) send(ctx context.Context, res *record.EventCorrelateResult) (*corev1.Event, string, error) {
	events := e.client.Events(res.Event.Namespace)
	if res.Event.Count > 1 {
		out, err := events.Patch(ctx, res.Event.Name, types.StrategicMergePatchType, res.Patch, metav1.PatchOptions{})
		if !apierrors.IsNotFound(err) {
			if err != nil {
				return nil, eventFailed, err
			}
			return out, eventUpdated, nil
		}
	}
	ev := res.Event.DeepCopy()
	ev.ResourceVersion = ""
	out, err := events.Create(ctx, ev, metav1.CreateOptions{})
	if err != nil {
		return nil, eventFailed, err
	}
	return out, eventCreated, nil
}

// WriteQueued writes, in the caller's goroutine, every Event already queued
// on the refusal lane, then on the revocation lane (the order least kind to
// the latter), calling after once after each write. Run's writers do this
// work in a running extauthz; a test with a fake clock steps it in after.
func (e *Recorder) WriteQueued(ctx context.Context, after func()) {
	for _, l := range []*Lane{e.refusals, e.revocations} {
		for drained := false; !drained; {
			select {
			case ev := <-l.queue:
				e.write(ctx, l, ev)
				after()
			default:
				drained = true
			}
		}
	}
}
