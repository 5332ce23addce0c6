package events

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/wirekube/relay-ws/internal/contract"
)

// Lanes of wirekube_extauthz_peer_events_total.
const (
	laneRevocation = "revocation" // Revoked: a live session closed by an object change
	laneRefusal    = "refusal"    // Refused: an upgrade refused
)

// Lane is one queue, spam filter and writer. One filter for both kinds
// would let the refusals of a peer (one every 5 minutes suffices after the
// burst) spend the budget its revocation Event needs; one queue would let a
// burst of refusals fill it. Each lane has eventsQueue slots and an
// eventsBurst per object and reason of its own (eventSpamKey): one reason's
// refusals never spend another's budget. The refusal lane also bounds the
// Events of one object and reason waiting in its queue (share, 0 for none):
// one peer's flood of one refusal cannot fill the queue another peer's
// Event, or the same peer's Event of another reason, needs.
type Lane struct {
	name  string
	queue chan *corev1.Event
	corr  *record.EventCorrelator
	share int
	seq   atomic.Uint64 // in the Events' names

	mu     sync.Mutex
	queued map[string]int // Events waiting per eventShareKey (share > 0)
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

// eventSpamKey is client-go's spam key (source, object, type) and the
// Event's reason: a budget per object and reason.
func eventSpamKey(ev *corev1.Event) string {
	o := &ev.InvolvedObject
	return strings.Join([]string{ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID),
		o.APIVersion, ev.Type, ev.Reason}, "\x00")
}

// eventShareKey names an Event's object and reason in a lane's queue share.
func eventShareKey(ev *corev1.Event) string {
	return ev.InvolvedObject.Kind + "/" + ev.InvolvedObject.Name + "/" + ev.Reason
}

// enqueue queues ev unless its object and reason hold the lane's share, or
// the queue is full; it never blocks. It returns the result to count, ""
// when queued.
func (l *Lane) enqueue(ev *corev1.Event) string {
	key := ""
	if l.share > 0 {
		key = eventShareKey(ev)
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.queued[key] >= l.share {
			return eventShareFull
		}
	}
	select {
	case l.queue <- ev:
		if key != "" {
			l.queued[key]++
		}
		return ""
	default:
		return eventDropped
	}
}

// dequeued gives ev's place in the share back once the writer took it.
func (l *Lane) dequeued(ev *corev1.Event) {
	if l.share == 0 {
		return
	}
	key := eventShareKey(ev)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.queued[key]--; l.queued[key] <= 0 {
		delete(l.queued, key)
	}
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
