package revocationhub

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
)

// Hub serves the revocation Watch stream (docs/revocation.md). A
// bridge sends the binding of every live session (the full set on each
// (re)connect, then adds and removes); the hub answers, on the same
// stream, which of them no longer hold: at once for the ones already
// invalid, later whenever an informer event ends one. It keeps no state
// beyond its streams, so a restarted extauthz re-judges everything from
// the bridge's next full list. Safe for concurrent use.
type Hub struct {
	judger  Judge
	events  Recorder
	limits  Options       // the bounds of streams and bindings
	live    *LiveBindings // the streams, shared with the Judge
	log     *slog.Logger
	metrics *metrics
	now     func() time.Time
	ready   chan struct{} // closed once the informer caches have synced
	ctx     context.Context
	stop    context.CancelFunc
	recv    sync.WaitGroup // receiving goroutines of the streams
}

// Judge re-judges a binding with the rules of an upgrade: "" while it
// still holds, else the reason it no longer does. extauthz's Authorizer is
// the Judge. Safe for concurrent use.
type Judge interface {
	Rejudge(b revocation.Binding) contract.Reason
}

// Recorder records a revocation as an Event on peer's WireKubePeer
// (extauthz/internal/events, through extauthz/peerevents.go); it never waits.
type Recorder interface {
	Revoked(peer string, r contract.Reason)
}

// Deps is what a Hub is built from.
type Deps struct {
	Judge  Judge
	Events Recorder
	Limits Options       // RevocationMaxStreams and RevocationMaxBindings are read
	Live   *LiveBindings // the set the Judge was built with
	Reg    prometheus.Registerer
	Log    *slog.Logger
}

// New builds a hub judging with d.Judge over the streams of d.Live; its
// metrics go to d.Reg.
func New(d Deps) (*Hub, error) {
	h := &Hub{judger: d.Judge, events: d.Events, limits: d.Limits, live: d.Live, log: d.Log,
		now: time.Now, ready: make(chan struct{})}
	h.ctx, h.stop = context.WithCancel(context.Background())
	m, err := newMetrics(d.Reg, d.Live.counts)
	if err != nil {
		return nil, err
	}
	h.metrics = m
	return h, nil
}

// MarkSynced lets streams start judging: before the caches hold a full
// list every Pod would look deleted. Call it once.
func (h *Hub) MarkSynced() { close(h.ready) }

// Shutdown ends every stream (so that a graceful gRPC stop need not wait
// for the bridges to leave) and waits for their receiving goroutines.
// Bridges reconnect to another extauthz or to this one after a restart.
func (h *Hub) Shutdown() {
	h.stop()
	h.recv.Wait()
}

// Watch implements revocation.WatchServer. It waits for the caches to
// sync, then runs the stream until the bridge goes away or Shutdown. The
// receiving goroutine it starts blocks in RecvMsg until gRPC ends the
// stream, which happens when Watch returns: Shutdown waits for it.
func (h *Hub) Watch(stream grpc.ServerStream) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	defer context.AfterFunc(h.ctx, cancel)()
	st := newStream()
	if err := h.join(st); err != nil {
		return err
	}
	defer h.live.leave(st)
	select {
	case <-h.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	h.log.Info("revocation stream opened")
	recvErr := make(chan error, 1)
	h.recv.Add(1)
	go func() {
		defer h.recv.Done()
		defer cancel()
		recvErr <- st.receive(ctx, stream, h.metrics.backpressure.Inc)
	}()
	err := h.serve(ctx, st, stream)
	select {
	case rerr := <-recvErr:
		err = rerr // the bridge left, or sent what does not decode
	default:
	}
	h.log.Info("revocation stream closed", slog.String("error", errString(err)))
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// join adds st to the hub's streams, or refuses it (ResourceExhausted)
// when --revocation-max-streams are open: a stream that waits for the
// caches counts too.
func (h *Hub) join(st *Stream) error {
	limit := h.limits.RevocationMaxStreams
	if !h.live.join(st, limit) {
		h.metrics.refused.WithLabelValues(refusedStreamsLimit).Inc()
		h.log.Warn("revocation stream refused: --revocation-max-streams open", slog.Int("limit", limit))
		return status.Errorf(codes.ResourceExhausted, "revocation: %d streams open (--revocation-max-streams)", limit)
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// serve judges what the bridge sent and what changed, and sends the
// revocations, until ctx is done. It is the stream's only sender.
func (h *Hub) serve(ctx context.Context, st *Stream, stream grpc.ServerStream) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-st.wake:
		}
		out := h.judge(st)
		if len(out) == 0 {
			continue
		}
		if err := revocation.Send(stream, out); err != nil {
			return err
		}
	}
}

// judge takes what is pending on st and returns the ops to send: the
// revocations first, in the order the bridge's ops came, then those the
// changed objects caused.
func (h *Hub) judge(st *Stream) []revocation.Op {
	ops, dirty := st.take()
	var out []revocation.Op
	for _, op := range ops {
		switch op.Kind {
		case revocation.KindAdd:
			if r, peer := h.judgeAdd(st, op); r != "" {
				out = append(out, h.revoke(op.ID, r, peer, time.Time{}))
			}
		case revocation.KindRemove:
			st.remove(op.ID)
		case revocation.KindSynced:
			out = append(out, revocation.Op{Kind: revocation.KindSyncedAck, ID: op.ID})
		}
	}
	for key, at := range dirty {
		for id, b := range st.bound(key) {
			if r := h.judger.Rejudge(b); r != "" {
				st.remove(id)
				out = append(out, h.revoke(id, r, b.Peer, at))
			}
		}
	}
	return out
}

// judgeAdd records a binding and judges it at once: it may have ended
// before the bridge could send it. It returns the revocation reason ("" when
// the binding holds) and the binding's peer.
func (h *Hub) judgeAdd(st *Stream, op revocation.Op) (contract.Reason, string) {
	b, err := revocation.ParseBinding(op.Binding)
	if err != nil {
		return contract.CloseRevoked, "" // not a binding this extauthz issues: cannot vouch
	}
	limit := h.limits.RevocationMaxBindings
	if added, first := st.add(op.ID, b, limit); !added {
		if first {
			h.log.Warn("revocation stream at --revocation-max-bindings: sessions beyond it are revoked (revocation_limit)",
				slog.Int("limit", limit))
		}
		return contract.CloseRevocationLimit, b.Peer // cannot watch it: cannot vouch
	}
	r := h.judger.Rejudge(b)
	if r != "" {
		st.remove(op.ID)
	}
	return r, b.Peer
}

// revoke is the revocation of session id for r, counted and recorded as an
// Event on peer's WireKubePeer (internal/events).
func (h *Hub) revoke(id uint64, r contract.Reason, peer string, at time.Time) revocation.Op {
	h.metrics.revocations.WithLabelValues(string(r)).Inc()
	h.events.Revoked(peer, r)
	op := revocation.Op{Kind: revocation.KindRevoke, ID: id, Reason: string(r)}
	if !at.IsZero() {
		op.EventUnixNano = at.UnixNano()
		h.metrics.eventToSend.Observe(h.now().Sub(at).Seconds())
	}
	return op
}

// Keepalive are the gRPC server options the revocation stream needs:
// bridges ping every 15 s to notice a vanished extauthz (so the default
// 5-minute minimum would make the server hang up on them), and the server
// pings idle connections to drop vanished bridges.
func Keepalive() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	}
}
