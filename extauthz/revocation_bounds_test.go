package extauthz

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
	"github.com/wirekube/relay-ws/internal/revocation/revocationpb"
)

// refusedCount reads wirekube_extauthz_revocation_streams_refused_total.
func (s *hubServer) refusedCount(t testing.TB, reason string) float64 {
	t.Helper()
	return testutil.ToFloat64(s.hub.Refused(reason))
}

// TestRevocationRefusesWithoutSecret: a caller without the secret, or with
// another one, gets Unauthenticated and no stream; reflection answers
// without it (schema only).
func TestRevocationRefusesWithoutSecret(t *testing.T) {
	s := serveHub(t, newEnv(t, nil))
	conn, err := grpc.NewClient("unix:"+s.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	for name, md := range map[string]metadata.MD{
		"no secret":    nil,
		"wrong secret": metadata.Pairs(revocation.SecretMetadataKey, revocation.NewSecret()),
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(context.Background(), md))
			defer cancel()
			cs, err := conn.NewStream(ctx, &revocation.StreamDesc, revocation.WatchMethod)
			must(t, err)
			_ = revocation.Send(cs, []revocation.Op{{Kind: revocation.KindSynced, ID: 1}}) // io.EOF once refused: Recv has the status
			if _, err := revocation.RecvFromExtauthz(cs); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("Recv = %v, want Unauthenticated", err)
			}
		})
	}
	if got := s.refusedCount(t, "unauthenticated"); got != 2 {
		t.Fatalf("refused{unauthenticated} = %v, want 2", got)
	}
	if got := listServices(t, conn); !got["wirekube.relay.revocation.v2.Revocation"] {
		t.Fatalf("reflection lists %v, want wirekube.relay.revocation.v2.Revocation", got)
	}
}

func listServices(t *testing.T, conn *grpc.ClientConn) map[string]bool {
	t.Helper()
	rc, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	must(t, err)
	must(t, rc.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}))
	resp, err := rc.Recv()
	must(t, err)
	must(t, rc.CloseSend())
	got := map[string]bool{}
	for _, svc := range resp.GetListServicesResponse().GetService() {
		got[svc.GetName()] = true
	}
	return got
}

// TestRevocationStreamsBound: with --revocation-max-streams=2 a third stream is
// refused (ResourceExhausted, counted); once one ends, a new one gets in.
func TestRevocationStreamsBound(t *testing.T) {
	s := serveHub(t, newEnv(t, func(o *Options) { o.RevocationMaxStreams = 2 }))
	conn := s.dial(t)
	a, b := s.open(t, conn), s.open(t, conn)
	for i, c := range []*revocationClient{a, b} {
		c.send(revocation.Op{Kind: revocation.KindSynced, ID: uint64(i + 1)})
		c.until(uint64(i + 1))
	}
	third := s.open(t, conn)
	_ = revocation.Send(third.stream, []revocation.Op{{Kind: revocation.KindSynced, ID: 3}}) // io.EOF once refused
	if _, err := revocation.RecvFromExtauthz(third.stream); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third stream: %v, want ResourceExhausted", err)
	}
	if got := s.refusedCount(t, "streams_limit"); got != 1 {
		t.Fatalf("refused{streams_limit} = %v, want 1", got)
	}
	must(t, a.stream.CloseSend())
	if _, err := revocation.RecvFromExtauthz(a.stream); err == nil {
		t.Fatal("closed stream still answers")
	}
	fourth := s.open(t, conn)
	fourth.send(revocation.Op{Kind: revocation.KindSynced, ID: 4})
	fourth.until(4)
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestRevocationBindingsFlood: 200,000 valid bindings on one stream (the attack
// that grew extauthz past its memory limit) leave 20,000 watched
// (--revocation-max-bindings' default), the 180,000 beyond revoked with
// revocation_limit, the heap within 64 MiB of where it started (the
// 200,000 took 215 MB before the bound), and a second stream of a real
// bridge judged as before.
func TestRevocationBindingsFlood(t *testing.T) {
	const flood, limit = 200_000, 20_000
	e := newEnv(t, nil)
	s := serveHub(t, e)
	conn := s.dial(t)
	before := heapInUse()
	c := s.open(t, conn)
	var limited, other atomic.Int64
	recvDone := make(chan error, 1)
	go func() {
		for {
			ops, err := revocation.RecvFromExtauthz(c.stream)
			if err != nil {
				recvDone <- err
				return
			}
			for _, op := range ops {
				switch {
				case op.Kind == revocation.KindSyncedAck:
					recvDone <- nil
					return
				case op.Reason == string(contract.CloseRevocationLimit):
					limited.Add(1)
				default:
					other.Add(1)
				}
			}
		}
	}()
	binding := podBinding().Format()
	batch := make([]revocation.Op, 0, revocation.MaxOps)
	for i := range flood {
		batch = append(batch, revocation.Op{Kind: revocation.KindAdd, ID: uint64(i + 1), Binding: binding})
		if len(batch) == cap(batch) || i == flood-1 {
			must(t, revocation.Send(c.stream, batch))
			batch = batch[:0]
		}
	}
	must(t, revocation.Send(c.stream, []revocation.Op{{Kind: revocation.KindSynced, ID: 1}}))
	must(t, <-recvDone)
	if limited.Load() != flood-limit || other.Load() != 0 {
		t.Fatalf("revoked %d with revocation_limit and %d otherwise, want %d and 0", limited.Load(), other.Load(), flood-limit)
	}
	if got := testutil.ToFloat64(gaugeOf(t, s.reg, "wirekube_extauthz_revocation_bindings")); got != limit {
		t.Fatalf("revocation_bindings = %v, want %d", got, limit)
	}
	if grew := int64(heapInUse()) - int64(before); grew > 64<<20 {
		t.Fatalf("heap grew %d MiB with the stream's bindings bounded", grew>>20)
	}
	bridge := s.open(t, conn)
	bridge.send(revocation.Op{Kind: revocation.KindAdd, ID: 1, Binding: binding}, revocation.Op{Kind: revocation.KindSynced, ID: 1})
	if got := bridge.until(1); len(got) != 0 {
		t.Fatalf("the real bridge's binding was revoked: %+v", got)
	}
}

// gaugeOf finds the collector of one metric family on reg.
func gaugeOf(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	return gathered{reg: reg, name: name}
}

// gathered is a Collector of one family of reg (for testutil.ToFloat64).
type gathered struct {
	reg  *prometheus.Registry
	name string
}

func (g gathered) Describe(chan<- *prometheus.Desc) {}

func (g gathered) Collect(ch chan<- prometheus.Metric) {
	mfs, _ := g.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == g.name {
			for _, m := range mf.GetMetric() {
				ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(g.name, "", nil, nil), prometheus.GaugeValue, m.GetGauge().GetValue())
			}
		}
	}
}

// floodStream is a bridge that sends n Adds and never reads: RecvMsg hands
// out the next batch at once, SendMsg blocks until the stream ends.
type floodStream struct {
	grpc.ServerStream
	ctx      context.Context
	n        int
	received atomic.Int64 // ops handed to the hub
}

func (f *floodStream) Context() context.Context { return f.ctx }

func (f *floodStream) RecvMsg(m any) error {
	left := f.n - int(f.received.Load())
	if left <= 0 {
		<-f.ctx.Done()
		return f.ctx.Err()
	}
	msg := &revocationpb.BridgeMessage{}
	for range min(left, revocation.MaxOps) {
		id := uint64(f.received.Add(1))
		msg.Ops = append(msg.Ops, &revocationpb.BridgeOp{Op: &revocationpb.BridgeOp_Add{
			Add: &revocationpb.Add{Session: id, Binding: "v9;not-a-binding"}}})
	}
	proto.Merge(m.(proto.Message), msg)
	return nil
}

func (f *floodStream) SendMsg(any) error {
	<-f.ctx.Done()
	return f.ctx.Err()
}

// TestRevocationBackpressure: 300,000 Adds (each answered by a revocation) on a
// stream that never reads. Once everything in the bubble is blocked, the
// hub has taken no more than two pending bounds of ops (one being
// answered, one waiting) instead of all 300,000, and counted the pause.
func TestRevocationBackpressure(t *testing.T) {
	const flood = 300_000
	e := newEnv(t, nil)
	synctest.Test(t, func(t *testing.T) {
		hub, err := newHub(e, prometheus.NewRegistry(), e.authz.log)
		must(t, err)
		hub.MarkSynced()
		ctx, cancel := context.WithCancel(context.Background())
		f := &floodStream{ctx: ctx, n: flood}
		done := make(chan error, 1)
		go func() { done <- hub.Watch(f) }()
		synctest.Wait()
		// The hub's pending bound is 4 messages of ops (2,048).
		if got, bound := f.received.Load(), int64(2*(4*revocation.MaxOps+revocation.MaxOps)); got > bound {
			t.Fatalf("hub took %d ops from a stream that never reads, want at most %d", got, bound)
		}
		if got := testutil.ToFloat64(hub.Backpressure()); got < 1 {
			t.Fatalf("revocation_backpressure_total = %v, want at least 1", got)
		}
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Watch = %v", err)
		}
		hub.Shutdown()
	})
}
