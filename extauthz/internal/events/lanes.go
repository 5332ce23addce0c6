package events

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// Bounds of every lane.
const (
	// eventsQueue bounds the Events waiting to be written; one more is
	// dropped (result="dropped").
	eventsQueue = 256
	// QueueShare bounds the refusal Events of one object and reason
	// waiting in the queue; one more is not queued (result="share_full").
	// One identity is refused for one reason at a time, about its own peer
	// (and, for peer_key_moved, the peer that held the key first): filling
	// the queue takes eventsQueue/QueueShare (32) such pairs.
	QueueShare = 8
	// eventsBurst Events per object and reason, then one every
	// eventsRefill: the spam filter keys on source, object, type and reason
	// (eventSpamKey), so every WireKubePeer (and Node) has a budget per
	// reason, and a flood of one refusal leaves the others' Events.
	eventsBurst  = 5
	eventsRefill = 5 * time.Minute
)

// Results of wirekube_extauthz_peer_events_total.
const (
	eventCreated     = "created"      // a new Event
	eventUpdated     = "updated"      // an existing Event's count patched
	eventRateLimited = "rate_limited" // the object's budget was spent
	eventDropped     = "dropped"      // the queue was full
	eventShareFull   = "share_full"   // the object and reason held their share of the queue
	eventFailed      = "failed"       // the API server refused or did not answer
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
