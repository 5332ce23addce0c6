package extauthz

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/wirekube/relay-ws/internal/contract"
)

// Lanes of wirekube_extauthz_peer_events_total (issue 28, item 3).
const (
	laneRevocation = "revocation" // Revoked: a live session closed by an object change
	laneRefusal    = "refusal"    // Refused: an upgrade refused
)

// eventLane is one queue, spam filter and writer. The spam filter keys on
// source, object and type only, so one filter for both kinds would let the
// refusals of a peer (one every 5 minutes suffices after the burst) spend
// the budget its revocation Event needs; one queue would let a burst of
// refusals fill it. Each lane has eventsQueue slots and an eventsBurst per
// object of its own.
type eventLane struct {
	name  string
	queue chan *corev1.Event
	corr  *record.EventCorrelator
}

func (e *PeerEvents) newLane(name string) *eventLane {
	for _, r := range []string{eventCreated, eventUpdated, eventRateLimited, eventDropped, eventFailed} {
		e.results.WithLabelValues(name, r)
	}
	return &eventLane{name: name, queue: make(chan *corev1.Event, eventsQueue),
		corr: record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{
			BurstSize: eventsBurst, QPS: float32(1 / eventsRefill.Seconds()), Clock: e.clock,
		})}
}

// record queues an Event about peer's WireKubePeer on lane l, or about the
// Node of that name when the peer does not exist; without either nothing is
// recorded (there is nothing for kubectl describe to show it on).
func (e *PeerEvents) record(l *eventLane, peer string, r contract.Reason, typ, msg string) {
	ref, ok := e.objects.PeerRef(peer)
	if !ok {
		if ref, ok = e.objects.NodeRef(peer); !ok {
			return
		}
	}
	e.enqueue(l, ref, string(r), typ, msg)
}

// enqueue queues an Event about ref on lane l (dropped and counted when
// the lane's queue is full).
func (e *PeerEvents) enqueue(l *eventLane, ref corev1.ObjectReference, reason, typ, msg string) {
	now := metav1.NewTime(e.clock.Now())
	ev := &corev1.Event{
		// The lane in the name: Events of both lanes about one object
		// recorded at the same instant must not collide.
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%s.%x", ref.Name, l.name, now.UnixNano()),
			Namespace: eventsNamespace},
		InvolvedObject: ref, Reason: reason, Message: msg, Type: typ,
		FirstTimestamp: now, LastTimestamp: now, Count: 1, Source: e.source,
		ReportingController: e.source.Component, ReportingInstance: e.source.Host,
	}
	select {
	case l.queue <- ev:
	default:
		e.results.WithLabelValues(l.name, eventDropped).Inc()
	}
}

// Run writes the queued Events of both lanes, one writer each, until ctx
// is done; it returns when both writers have.
func (e *PeerEvents) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, l := range []*eventLane{e.revocations, e.refusals} {
		wg.Go(func() { e.runLane(ctx, l) })
	}
	wg.Wait()
}

func (e *PeerEvents) runLane(ctx context.Context, l *eventLane) {
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
func (e *PeerEvents) write(ctx context.Context, l *eventLane, ev *corev1.Event) {
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
func (e *PeerEvents) send(ctx context.Context, res *record.EventCorrelateResult) (*corev1.Event, string, error) {
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
