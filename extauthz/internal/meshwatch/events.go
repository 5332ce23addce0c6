package meshwatch

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wirekube/relay-ws/extauthz/internal/events"
	"github.com/wirekube/relay-ws/internal/contract"
)

// laneMesh is the lane of wirekube_extauthz_peer_events_total that carries
// the mesh watch's Events: a queue, a spam filter (5 per mesh, then one
// every 5 minutes, as every lane) and a writer of its own, so a mesh rewritten
// in a loop spends no peer's Event budget.
const laneMesh = "mesh"

// meshEvents records Events on WireKubeMeshes on a lane of the Events room.
type meshEvents struct {
	e    *events.Recorder
	lane *events.Lane
}

func newMeshEvents(e *events.Recorder) *meshEvents {
	return &meshEvents{e: e, lane: e.NewLane(laneMesh, events.QueueShare)}
}

// run writes the queued Events until ctx is done.
func (m *meshEvents) run(ctx context.Context) { m.e.RunLane(ctx, m.lane) }

// record queues the Event of a mesh's new judgement r (was: the target
// before, "" at first sight), if it calls for one: a Warning when the
// agents' tokens go elsewhere or in clear, or when a mesh stops leading to
// this gateway; a Normal one when it leads here again after an exposure.
func (m *meshEvents) record(u *unstructured.Unstructured, was contract.MeshRelayTarget, r meshRelay) {
	typ, msg := meshEventText(was, r)
	if msg == "" || u.GetUID() == "" {
		return
	}
	ref := corev1.ObjectReference{APIVersion: GVR.GroupVersion().String(), Kind: Kind,
		Name: u.GetName(), UID: u.GetUID()}
	m.e.Enqueue(m.lane, ref, string(r.Target), typ, msg)
}

// meshEventText is the Event's type and message ("": no Event): fixed
// words, the field's name, yes/no and the endpoint's hash, never a value of
// the mesh.
func meshEventText(was contract.MeshRelayTarget, r meshRelay) (typ, msg string) {
	where := fmt.Sprintf("(%s %s, sha256 %s; host matches --expected-relay-url: %s, path: %s)",
		r.Provider, r.Source, r.Hash, yesNo(r.HostMatch), yesNo(r.PathMatch))
	switch {
	case r.Target == contract.MeshRelayWSCleartext:
		return corev1.EventTypeWarning, "spec.relay sends every agent's relay token unencrypted: a ws:// URL " + where
	case r.Target == contract.MeshRelayOtherWSS:
		return corev1.EventTypeWarning, "spec.relay sends every agent's relay token to a host, port or path other " +
			"than this gateway's " + where
	case was.Exposes() && r.Target == contract.MeshRelayThisGateway:
		return corev1.EventTypeNormal, "spec.relay leads the agents to this gateway again (this_gateway)"
	case was == contract.MeshRelayThisGateway && r.Target != contract.MeshRelayThisGateway:
		return corev1.EventTypeWarning, "spec.relay no longer leads the agents to this gateway (" + string(r.Target) + ")"
	}
	return "", ""
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
